/* Stand-in for the MSDK's gcfr_regs.h (declarations only; tests/emit). */
#ifndef GCFR_REGS_STUB_H
#define GCFR_REGS_STUB_H

#include <stdint.h>

typedef struct {
  volatile uint32_t reg0;
  volatile uint32_t reg1;
  volatile uint32_t reg2;
  volatile uint32_t reg3;
} mxc_gcfr_regs_t;
extern mxc_gcfr_regs_t *MXC_GCFR;

#endif /* GCFR_REGS_STUB_H */
