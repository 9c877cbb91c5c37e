"""Where each layer runs, and what the CPU's layers cost (issue 28, item 5).

The CPU's cycles come from onnx2ai8x.cpu.cycles (its Cortex-M4 model states its
cycles-per-MAC and source); the accelerator's time is the conversion's own estimate
(the `inference` phase of report.json). A split whose CPU share passes CPU_DOMINATES
warns and names the CPU layers that cost most.
"""
from __future__ import annotations

import json

from ..phases import cpu_share, share_text

CPU_DOMINATES = 0.5  # the CPU's share of one inference's compute time that warns
BANNER = "=" * 78


def _estimate(op) -> tuple[int, int]:
    from ..cpu import cycles

    macs, cyc = cycles.estimate(op)
    return int(macs), int(cyc)


def _model() -> str:
    from ..cpu import cycles

    return cycles.MODEL


def _clocks(result) -> tuple[float, float | None, int]:
    """(CPU MHz, accelerator inference microseconds, accelerator cycles) from the
    conversion's report."""
    data = json.loads(result.report_json)
    phases = {p["name"]: p for p in data.get("phases", {}).get("phases", [])}
    cpu_mhz = float(phases.get("input", {}).get("clock_mhz") or 100)
    acc_us = phases.get("inference", {}).get("us")
    return cpu_mhz, acc_us, int(data.get("total_cycles", 0))


def cpu_report(part, result) -> tuple[str, dict]:
    """The split as a banner and table for the summary, and its report.json section."""
    cpu_mhz, acc_us, acc_cycles = _clocks(result)
    rows, segs = [], []
    segments = [("cpu-stem", part.stem),
                *((f"cpu-mid{k}", b) for k, b in enumerate(part.between)),
                ("cpu-head", part.head)]
    for where, seg in segments:
        if seg is None:
            continue
        total_m = total_c = 0
        for op in seg.ops:
            macs, cyc = _estimate(op)
            total_m += macs
            total_c += cyc
            rows.append({"segment": where, "layer": op.name, "kind": op.kind,
                         "out_shape": list(op.out_shape), "macs": macs, "cycles": cyc})
        segs.append({"segment": where, "layers": len(seg.ops), "macs": total_m,
                     "cycles": total_c, "us": round(total_c / cpu_mhz, 3)})
    cpu_us = sum(s["us"] for s in segs)
    share = cpu_share(cpu_us, acc_us) if acc_us else None
    data = {"stem_nodes": list(part.split.stem), "head_nodes": list(part.split.head),
            "between_nodes": [list(b) for b in part.split.between],
            "between_after_layers": list(part.quant.last_layers),
            "accelerator_input": part.split.acc_input,
            "accelerator_output": part.split.acc_output,
            "refusals": list(part.split.reasons), "cpu_layers": rows, "segments": segs,
            "cpu_mhz": cpu_mhz, "accelerator_us": acc_us,
            "accelerator_cycles": acc_cycles, "cpu_us": round(cpu_us, 3),
            "cpu_share": share,
            "cpu_cycle_model": _model()}
    data["sequence"] = _sequence(part, result)
    warn = None
    if share is not None and share > CPU_DOMINATES:
        worst = sorted(rows, key=lambda r: -r["cycles"])[:3]
        warn = (f"warning[cpu.share] the CPU takes {share_text(share)} of the inference's "
                f"compute "
                f"time; change {', '.join(r['layer'] for r in worst)} to layers the "
                "accelerator runs (3x3 or 1x1 kernels, its activations, a Linear over at "
                "most 16x16 pixels)")
        data["warning"] = warn
    return _text(part, rows, segs, acc_us, acc_cycles, share, warn), data


def _sequence(part, result) -> list[dict]:
    """Every layer in the order the project runs them, and where it runs."""
    acc = [lay["name"] for lay in json.loads(result.report_json).get("layers", [])]
    seq = [{"layer": op.name, "runs_on": "cpu", "segment": "cpu-stem"}
           for op in (part.stem.ops if part.stem is not None else ())]
    mids = dict(zip(part.quant.last_layers, part.between, strict=True))
    for k, name in enumerate(acc):
        seq.append({"layer": name, "runs_on": "accelerator", "segment": "accelerator",
                    "index": k})
        if name in mids:
            seq += [{"layer": op.name, "runs_on": "cpu",
                     "segment": f"cpu-mid{list(mids).index(name)}"}
                    for op in mids[name].ops]
    seq += [{"layer": op.name, "runs_on": "cpu", "segment": "cpu-head"}
            for op in (part.head.ops if part.head is not None else ())]
    return seq


def _text(part, rows, segs, acc_us, acc_cycles, share, warn) -> str:
    out = [BANNER, "SPLIT BETWEEN THE ARM CORE AND THE ACCELERATOR (--cpu-fallback)"]
    if part.stem is not None:
        out.append(f"  CPU stem:    {len(part.stem.ops)} layer(s) from the model input to "
                   f"{part.split.acc_input}")
    out.append(f"  accelerator: {part.split.acc_input} -> {part.split.acc_output} "
               f"({acc_cycles:,} cycles" +
               (f", {acc_us:,.1f} us)" if acc_us is not None else ")"))
    for k, (seg, after) in enumerate(zip(part.between, part.quant.last_layers,
                                         strict=True)):
        out.append(f"  CPU mid{k}:    {len(seg.ops)} layer(s) after accelerator layer "
                   f"{after}: the accelerator stops there, the CPU rewrites its output in "
                   "place, the accelerator continues")
    if part.head is not None:
        out.append(f"  CPU head:    {len(part.head.ops)} layer(s) from "
                   f"{part.split.acc_output} to the model output")
    out += [f"  moved because: {r}" for r in part.split.reasons]
    out.append("")
    out.append(f"  {'segment':<9} {'layer':<28} {'kind':<9} {'MACs':>12} {'M4 cycles':>12}")
    out += [f"  {r['segment']:<9} {r['layer'][:28]:<28} {r['kind']:<9} {r['macs']:>12,} "
            f"{r['cycles']:>12,}" for r in rows]
    for s in segs:
        out.append(f"  {s['segment']} total: {s['macs']:,} MACs, {s['cycles']:,} cycles "
                   f"({s['us']:,.1f} us)")
    if share is not None:
        out.append(f"  CPU share of the compute time: {share_text(share)} (CPU at the "
                   "system clock; the M4 cycle model is in report.json, "
                   "partition.cpu_cycle_model)")
    if warn:
        out.append("  " + warn)
    out.append(BANNER)
    return "\n".join(out) + "\n"


__all__ = ["CPU_DOMINATES", "cpu_report"]
