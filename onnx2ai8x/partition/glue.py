"""cpu_io.c / cpu_io.h: the CPU segments joined to the accelerator in the project
(issue 28, item 3).

The stem runs on the sample (its int8 input) and its output is packed into the words
main.c's load_input() copies into data memory (or feeds the FIFOs): main.c's input
arrays become cpu_io.c's, written at run time by the CPU. The head reads the
accelerator's output bytes from data memory where the known-answer check finds them,
runs, and compares the model's final output with the reference's. The CPU's buffers are
static arrays the linker places in the Arm core's system RAM, never in the accelerator's
data, weight or bias memories (those are peripheral address ranges, seed 000 "Memory
map"), so no scratch of the CPU can overwrite the accelerator's state.
"""
from __future__ import annotations

import numpy as np

from .datamem import PackRun, ReadRun

PER_LINE = 16


def _array(ctype: str, name: str, values, const: bool = True) -> str:
    vals = [int(v) for v in np.asarray(values).reshape(-1)]
    lines = [", ".join(str(v) for v in vals[i:i + PER_LINE])
             for i in range(0, len(vals), PER_LINE)]
    body = ",\n  ".join(lines)
    return (f"static {'const ' if const else ''}{ctype} {name}[{len(vals)}] = {{\n"
            f"  {body}\n}};\n")


def _packs(name: str, runs: list[PackRun]) -> str:
    rows = [f"  {{ {r.word}u, {r.count}u, {{ {', '.join(map(str, r.first))} }}, "
            f"{{ {', '.join(map(str, r.step))} }} }}" for r in runs]
    return (f"static const cpu_pack_t {name}[{len(runs)}] = {{\n" + ",\n".join(rows) +
            "\n};\n")


def _reads(name: str, runs: list[ReadRun]) -> str:
    rows = [f"  {{ {r.value}u, {r.count}u, 0x{r.addr:08x}u, {r.step}, {r.lane}u }}"
            for r in runs]
    return (f"static const cpu_read_t {name}[{len(runs)}] = {{\n" + ",\n".join(rows) +
            "\n};\n")


PACK = """typedef struct {
  uint32_t word, count;   /* words word..word+count-1 of the input array */
  int32_t first[4];       /* value in byte lane l of the first word (-1: zero) */
  int32_t step[4];        /* ... advancing by step[l] per word */
} cpu_pack_t;

/* Pack int8 values into the words the accelerator reads (byte lane l = bits 8l..8l+7). */
static void cpu_pack(uint32_t *words, const int8_t *x, const cpu_pack_t *runs,
                     uint32_t n_runs)
{
  uint32_t r, i, w;
  int l;

  for (r = 0; r < n_runs; r++) {
    for (i = 0; i < runs[r].count; i++) {
      w = 0;
      for (l = 0; l < 4; l++) {
        if (runs[r].first[l] >= 0)
          w |= (uint32_t) (uint8_t) x[runs[r].first[l] + (int32_t) i * runs[r].step[l]]
               << (8 * l);
      }
      words[runs[r].word + i] = w;
    }
  }
}
"""

READ = """typedef struct {
  uint32_t value, count;  /* values value..value+count-1 */
  uint32_t addr;          /* in the data memory word at addr + i * step */
  int32_t step;
  uint32_t lane;          /* byte lane of that word */
} cpu_read_t;

/* Read int8 values from the accelerator's data memory. */
static void cpu_read(int8_t *x, const cpu_read_t *runs, uint32_t n_runs)
{
  uint32_t r, i, b;

  for (r = 0; r < n_runs; r++) {
    for (i = 0; i < runs[r].count; i++) {
      b = (*(volatile uint32_t *) (uintptr_t) (runs[r].addr + (uint32_t) ((int32_t) i *
                                                                         runs[r].step))
           >> (8 * runs[r].lane)) & 0xffu;
      x[runs[r].value + i] = (int8_t) ((int32_t) b - ((b & 0x80u) ? 256 : 0));
    }
  }
}
"""


WRITE = """/* Write int8 values back where cpu_read found them (the other byte lanes kept). */
static void cpu_write(const int8_t *x, const cpu_read_t *runs, uint32_t n_runs)
{
  uint32_t r, i, w;
  volatile uint32_t *p;

  for (r = 0; r < n_runs; r++) {
    for (i = 0; i < runs[r].count; i++) {
      p = (volatile uint32_t *) (uintptr_t) (runs[r].addr + (uint32_t) ((int32_t) i *
                                                                      runs[r].step));
      w = *p & ~(0xffu << (8 * runs[r].lane));
      *p = w | (uint32_t) (uint8_t) x[runs[r].value + i] << (8 * runs[r].lane);
    }
  }
}
"""


def render_between(betweens: list[dict], lcnt_addrs: list[int], counts: list[int]
                   ) -> tuple[list[str], list[str]]:
    """Header and C lines of the segments between accelerator runs. `betweens[k]`:
    reads (where the accelerator left the values, and where the CPU writes its result),
    size. `counts[j]`: the layer count register of run j (last layer, start layer in
    bits 8 and up: the hardware's own start/stop of a run of layers)."""
    h = ["void cpu_accelerator_start(void); /* the first run: up to the first CPU "
         "segment */",
         "void cpu_between_runs(void); /* the CPU segments and the later runs */"]
    c = [WRITE, _array("uint32_t", "cpu_layer_counts", counts),
         "/* The layer count register of every quadrant: the last layer of a run (bits "
         "0-7),", " * the layer it starts at (bits 8 and up). */",
         "static void cpu_layer_count(uint32_t value)", "{",
         *[f"  *((volatile uint32_t *) 0x{a:08x}u) = value;" for a in lcnt_addrs],
         "}", "", "void cpu_accelerator_start(void)", "{",
         "  cpu_layer_count(cpu_layer_counts[0]);", "}", ""]
    body = []
    for k, b in enumerate(betweens):
        n = b["size"]
        # the result goes back over the same words, in the next run's input layout
        # (the same as the reads unless the segment reorders the axes)
        writes = b.get("writes", b["reads"])
        same = writes == b["reads"]
        c += [f"static int8_t cpu_b{k}_in[{n}];", f"static int8_t cpu_b{k}_out[{n}];",
              _reads(f"cpu_b{k}_reads", b["reads"]),
              *([] if same else [_reads(f"cpu_b{k}_writes", writes)])]
        target = f"cpu_b{k}_reads" if same else f"cpu_b{k}_writes"
        body += [f"  /* CPU segment {k}: after hardware layer {b['after']} */",
                 f"  cpu_read(cpu_b{k}_in, cpu_b{k}_reads, {len(b['reads'])}u);",
                 f"  cpu_between{k}(cpu_b{k}_in, cpu_b{k}_out);",
                 f"  cpu_write(cpu_b{k}_out, {target}, {len(writes)}u);",
                 f"  cpu_layer_count(cpu_layer_counts[{k + 1}]);",
                 "  cnn_start();", "  while (cnn_time == 0) ; /* the accelerator's next "
                 "run */"]
    c += ["void cpu_between_runs(void)", "{", *body, "}", ""]
    return h, c


def render(*, stem_sample: np.ndarray | None, stem_out_size: int,
           packs: list[list[PackRun]], word_counts: list[int],
           head_in_size: int, reads: list[ReadRun] | None,
           head_expected: np.ndarray | None, head_ctype: str,
           between: tuple[list[str], list[str]] | None = None) -> dict[str, str]:
    """The two files. `packs[k]`: how input array k is packed from the stem's output;
    `reads`: where the head's input values sit; `head_expected`: the model's final
    output (the reference's) the known-answer test compares."""
    h = ["/* The CPU segments joined to the accelerator (generated by onnx2ai8x). */",
         "#ifndef CPU_IO_H", "#define CPU_IO_H", "", "#include <stdint.h>", ""]
    c = ["/* The CPU segments joined to the accelerator (generated by onnx2ai8x): the stem",
         " * writes the accelerator's input words, the head reads its output from data",
         " * memory. */",
         "#include <stdint.h>", "#include <stdio.h>", '#include "cnn.h"',
         '#include "cpu_layers.h"', '#include "cpu_io.h"', ""]
    if stem_sample is not None:
        for k, n in enumerate(word_counts):
            h.append(f"extern uint32_t cpu_input_{k}[{n}]; /* main.c's input_{k} */")
        h.append("void cpu_stem_input(void); /* run the stem on the sample, pack its "
                 "output */")
        c += [PACK, _array("int8_t", "cpu_sample", stem_sample),
              f"static int8_t cpu_stem_out[{stem_out_size}];"]
        for k, n in enumerate(word_counts):
            c += [f"uint32_t cpu_input_{k}[{n}];", _packs(f"cpu_pack_{k}", packs[k])]
        body = [f"  cpu_pack(cpu_input_{k}, cpu_stem_out, cpu_pack_{k}, "
                f"{len(packs[k])}u);" for k in range(len(word_counts))]
        c += ["void cpu_stem_input(void)", "{", "  cpu_stem(cpu_sample, cpu_stem_out);",
              *body, "}", ""]
    if reads is not None or between is not None:
        c.append(READ)
    if between is not None:
        h += between[0]
        c += between[1]
    if reads is not None and head_expected is not None:
        n = int(head_expected.size)
        h.append("int cpu_head_check(void); /* run the head, compare the final output */")
        c += [f"static int8_t cpu_head_in[{head_in_size}];",
              f"static {head_ctype} cpu_head_out[{n}];",
              _array(head_ctype, "cpu_expected", head_expected), _reads("cpu_reads", reads),
              "int cpu_head_check(void)", "{", "  uint32_t i;", "",
              f"  cpu_read(cpu_head_in, cpu_reads, {len(reads)}u);",
              "  cpu_head(cpu_head_in, cpu_head_out);",
              f"  for (i = 0; i < {n}u; i++) {{",
              "    if (cpu_head_out[i] != cpu_expected[i]) {",
              '      printf("CPU head output %lu: expected %ld, got %ld\\n", '
              "(unsigned long) i,",
              "             (long) cpu_expected[i], (long) cpu_head_out[i]);",
              "      return CNN_FAIL;", "    }", "  }", "  return CNN_OK;", "}", ""]
    h += ["", "#endif /* CPU_IO_H */", ""]
    return {"cpu_io.h": "\n".join(h), "cpu_io.c": "\n".join(c)}


def _runs_between(text: str) -> str:
    """The first accelerator run stops before the first CPU segment; the segments and
    the later runs follow its wait."""
    import re

    start = text.find("  cnn_start();\n", text.find("int main(void)"))
    if start < 0:
        raise ValueError("main.c starts no inference")
    wait = re.compile(r"^( *)while \(cnn_time == 0\)([^\n]*)\n", re.M).search(text, start)
    if wait is None:
        raise ValueError("main.c waits for no inference")
    end = wait.end()
    if not wait.group(2).strip().startswith(";"):
        end = text.index("\n", end) + 1  # the loop's body line
    indent = wait.group(1)
    return (text[:start] + "  cpu_accelerator_start(); /* run 1: up to the first CPU "
            "segment */\n" + text[start:end] + f"{indent}cpu_between_runs(); /* the CPU "
            "segments and the accelerator's later runs */\n" + text[end:])


def patch_main(text: str, n_inputs: int, stem: bool, head: bool,
               between: bool = False) -> str:
    """main.c with the CPU segments in the sequence: the stem inside load_input() (so
    every input load computes it), the head after the accelerator's own check."""
    out = text.replace('#include "cnn.h"\n',
                       '#include "cnn.h"\n#include "cpu_layers.h"\n#include "cpu_io.h"\n',
                       1)
    if stem:
        for k in range(n_inputs):
            old = f"static const uint32_t input_{k}[] = SAMPLE_INPUT_{k};"
            new = (f"#define input_{k} cpu_input_{k} /* written by the CPU stem "
                   "(cpu_io.c) */")
            if old not in out:
                raise ValueError(f"main.c has no input_{k} array")
            out = out.replace(old, new, 1)
        anchor = "void load_input(void)\n{\n"
        if anchor not in out:
            raise ValueError("main.c has no load_input()")
        out = out.replace(anchor, anchor + "  cpu_stem_input(); /* the CPU stem "
                          "computes the accelerator's input */\n", 1)
    if between:
        out = _runs_between(out)
    if head:
        anchor = "  if (check_output() != CNN_OK) fail();\n"
        if anchor not in out:
            raise ValueError("main.c has no check_output() call")
        out = out.replace(anchor, anchor + "  if (cpu_head_check() != CNN_OK) fail(); "
                          "/* the CPU head and the model's output */\n", 1)
    return out


__all__ = ["patch_main", "render"]
