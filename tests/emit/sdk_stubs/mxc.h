/* Stand-in for the MSDK's mxc.h: declarations only, for host syntax checks of the
 * generated C (tests/emit). Names follow the SDK's public API. */
#ifndef MXC_STUB_H
#define MXC_STUB_H

#include <stdint.h>

typedef struct {
  volatile uint32_t pclkdiv;
  volatile uint32_t ipll_ctrl;
} mxc_gcr_regs_t;
extern mxc_gcr_regs_t *MXC_GCR;

typedef struct {
  volatile uint32_t out;
} mxc_gpio_regs_t;
extern mxc_gpio_regs_t *MXC_GPIO0, *MXC_GPIO1, *MXC_GPIO2, *MXC_GPIO3;

typedef struct {
  mxc_gpio_regs_t *port;
  uint32_t mask;
  int pad;
  int func;
} mxc_gpio_cfg_t;

typedef struct {
  volatile uint32_t cache_ctrl;
} mxc_icc_regs_t;
extern mxc_icc_regs_t *MXC_ICC0;

typedef struct {
  volatile uint32_t count;
} mxc_tmr_regs_t;
extern mxc_tmr_regs_t *MXC_TMR0, *MXC_TMR1, *MXC_TMR2, *MXC_TMR3, *MXC_TMR4, *MXC_TMR5;

typedef enum { CNN_IRQn = 69 } IRQn_Type;
typedef enum { MXC_SYS_PERIPH_CLOCK_CNN = 25 } mxc_sys_periph_clock_t;

#define MXC_GPIO_PAD_NONE 0
#define MXC_GPIO_FUNC_OUT 1
#define MXC_GPIO_PIN_0 (1u << 0)
#define MXC_GPIO_PIN_1 (1u << 1)
#define MXC_GPIO_PIN_2 (1u << 2)
#define MXC_GPIO_PIN_3 (1u << 3)
#define MXC_GPIO_PIN_4 (1u << 4)
#define MXC_GPIO_PIN_5 (1u << 5)
#define MXC_GPIO_PIN_6 (1u << 6)
#define MXC_GPIO_PIN_7 (1u << 7)

#define MXC_F_GCR_PCLKDIV_CNNCLKDIV (0x7u << 14)
#define MXC_F_GCR_PCLKDIV_CNNCLKSEL (0x3u << 17)
#define MXC_S_GCR_PCLKDIV_CNNCLKSEL_PCLK (0x0u << 17)
#define MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL (0x1u << 17)
#define MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV1 (0x0u << 14)
#define MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV2 (0x1u << 14)
#define MXC_S_GCR_PCLKDIV_CNNCLKDIV_DIV4 (0x2u << 14)
#define MXC_F_GCR_IPLL_CTRL_RDY (1u << 29)
#define MXC_F_GCR_IPLL_CTRL_EN (1u << 0)

typedef enum { MXC_SYS_CLOCK_IPO = 0 } mxc_sys_system_clock_t;
#define SEC(s) ((s) * 1000000)

extern uint32_t SystemCoreClock;
void SystemCoreClockUpdate(void);
void MXC_ICC_Enable(mxc_icc_regs_t *icc);
int MXC_SYS_Clock_Select(mxc_sys_system_clock_t clock);
int MXC_Delay(uint32_t us);
int MXC_SYS_ClockEnable(mxc_sys_periph_clock_t clock);
int MXC_SYS_ClockDisable(mxc_sys_periph_clock_t clock);
int MXC_GPIO_Config(const mxc_gpio_cfg_t *cfg);
void MXC_GPIO_OutSet(mxc_gpio_regs_t *port, uint32_t mask);
void MXC_GPIO_OutClr(mxc_gpio_regs_t *port, uint32_t mask);
void MXC_NVIC_SetVector(IRQn_Type irq, void (*handler)(void));
void NVIC_EnableIRQ(IRQn_Type irq);
void NVIC_DisableIRQ(IRQn_Type irq);
void MXC_LP_EnterSleepMode(void);
void MXC_TMR_SW_Start(mxc_tmr_regs_t *tmr);
uint32_t MXC_TMR_SW_Stop(mxc_tmr_regs_t *tmr);

#endif /* MXC_STUB_H */
