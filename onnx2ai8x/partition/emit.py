"""The CPU segments' files in the converted project (issue 28, item 3): cpu_layers.c/.h
(onnx2ai8x.cpu.cgen), cpu_io.c/.h (partition/glue.py), main.c running stem,
accelerator and head in order, and the report's split (partition/report.py).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import Ai8xError


def _placed(request):
    """The accelerator part lowered as the conversion lowers it (map/lowered.HwNetwork:
    its network, placement and hardware layers)."""
    from ..convert import plan
    from ..options import EmitOptions

    options = EmitOptions.from_cli(request.device, **request.options)
    return plan(request.model, request.device, request.sidecar, options=options).hw


def _between(part, joined, lowered):
    """Header and C of the CPU segments between accelerator runs: each reads the output
    of its part's last layer and writes its result in place; the layer count register
    of each run (seed 000 does not describe it; the vendor tool's --start-layer and
    --stop-after write last layer | start layer << 8, and so does cnn_configure)."""
    from ..emit.unload import _check_entries
    from . import glue
    from .datamem import output_locations

    network, placement, hw = lowered.network, lowered.placement, lowered.view
    names = [lay.name for lay in network.layers]
    infos, lasts = [], []
    for k, name in enumerate(part.quant.last_layers):
        if name not in names:
            raise Ai8xError("partition.between", name, "the layer before a CPU segment is "
                            "no longer in the accelerator's network",
                            "report this model: the rewrites changed the network")
        ll = names.index(name)
        shape = joined.between_inputs[k].shape
        reads = output_locations(lambda v, ll=ll: _check_entries(placement, ll, v), shape)
        # the segment's result (in the next part's channels-first order, build._between)
        # written over the same words in the next part's shape (build._check_junction):
        # the same layout as the reads, so glue writes through the reads' table
        seg = part.between[k]
        writes = output_locations(lambda v, ll=ll, s=shape: _check_entries(
            placement, ll, np.asarray(v).reshape(s)), tuple(seg.ops[-1].out_shape))
        lasts.append(hw.hw_index(ll))
        infos.append({"reads": reads, "writes": writes, "size": int(np.prod(shape)),
                      "after": lasts[-1]})
    first = hw.start_layer + hw.hw_add_layers[hw.start_layer]
    final = placement.final_layer + hw.sum_hw_layers
    starts = [first] + [last + 1 for last in lasts]
    counts = [last | start << 8 for last, start in zip([*lasts, final], starts,
                                                         strict=True)]
    dev = placement.device
    addrs = [dev.ctl_addr(g, dev.regs.reg_lcnt_max) for g in hw.groups_used]
    return glue.render_between(infos, addrs, counts)


def _expected_output(request, placement, joined) -> str:
    """sampleoutput.h with the accelerator's output as the CPU segments between its runs
    make it (the conversion's reference ran the chained network without them)."""
    from ..emit.project import _environment, _listed
    from ..emit.unload import expected_output
    from ..options import EmitOptions

    options = EmitOptions.from_cli(request.device, **request.options)
    groups = expected_output(placement, [joined.acc_output],
                             max_checklines=options.max_checklines)
    runs = tuple((addr, mask, len(words), _listed(words)) for addr, mask, words in groups)
    return _environment().get_template("sampleoutput.h.j2").render(
        name=placement.network.name, expected_runs=runs)


def _input_words(lowered, main_text: str):
    """Per input array of main.c: a function from an input tensor to its words."""
    from ..emit.memory import input_loads

    if "fifo_0" not in main_text:
        return lambda s: [w for _, w in input_loads(lowered, s)]
    from ..emit.project import fifo_feed

    return lambda s: list(fifo_feed(lowered.view, s).words)


def _head_reads(placement, shape):
    from ..emit.unload import _check_entries, known_answer_layers
    from .datamem import output_locations

    network = placement.network
    layers = known_answer_layers(placement)
    if len(layers) != 1 or network.layers[layers[0]].output_width != 8:
        raise Ai8xError("partition.head-input", network.layers[layers[-1]].name,
                        "the CPU head reads one 8-bit accelerator output",
                        "end the accelerator's part in one layer")
    ll = layers[0]
    return output_locations(lambda v: _check_entries(placement, ll, v), shape)


def add_cpu_files(request, joined, result) -> tuple[str, str]:
    """Write the CPU files into the project at request.output; the summary and
    report.json with the split."""
    from ..cpu import cgen
    from . import glue
    from .datamem import pack_runs, probe_words
    from .report import cpu_report

    part = joined.part
    out = Path(request.output)
    lowered = _placed(request)
    network, placement = lowered.network, lowered.placement
    main = (out / "main.c").read_text()
    if part.between and ("fifo_0" in main or placement.layers[0].streaming):
        # run 2 would start with the FIFO enabled and no data arriving: the runs after a
        # CPU segment read data memory only
        raise Ai8xError("partition.between-fifo", network.layers[0].name,
                        "a CPU segment between accelerator layers needs the input in data "
                        "memory, not fed through the FIFOs (or streamed)",
                        "drop --fifo / --fast-fifo, or make the input small enough for "
                        "data memory")
    segments = [s for s in (part.stem, *part.between, part.head) if s is not None]
    files = dict(cgen.render(segments))
    packs, counts, reads = [], [], None
    if part.stem is not None:
        words_of = _input_words(lowered, main)
        maps = probe_words(words_of, tuple(network.input_shape))
        packs = [pack_runs(m) for m in maps]
        counts = [m.shape[0] for m in maps]
    if part.head is not None:
        reads = _head_reads(placement, joined.acc_output.shape)
    final = np.asarray(joined.final).reshape(-1)
    files.update(glue.render(
        stem_sample=None if part.stem is None else joined.sample,
        stem_out_size=int(np.prod(network.input_shape)), packs=packs, word_counts=counts,
        head_in_size=int(joined.acc_output.size), reads=reads,
        head_expected=final if part.head is not None else None,
        head_ctype="int32_t" if final.dtype.kind == "i" and
        part.head is not None and part.head.ops[-1].out_dtype != "int8" else "int8_t",
        between=_between(part, joined, lowered) if part.between else None))
    files["main.c"] = glue.patch_main(main, len(counts), part.stem is not None,
                                      part.head is not None, bool(part.between))
    if part.between:
        files["sampleoutput.h"] = _expected_output(request, placement, joined)
    text, data = cpu_report(part, result)
    report = json.loads(result.report_json)
    report["partition"] = data
    summary = result.summary
    if result.phases is not None:
        # the CPU's layers are phases of the inference too (issue 35 item 4)
        from ..phases import phases_json, render_phases, with_cpu_segments

        phases = with_cpu_segments(result.phases, [(s["segment"], s["cycles"],
                                                    data["cpu_mhz"]) for s in data["segments"]])
        report["phases"] = phases_json(phases)
        summary = summary.replace(render_phases(result.phases), render_phases(phases))
    report_json = json.dumps(report, indent=2, sort_keys=True) + "\n"
    files["report.json"] = report_json
    from .reference import full_model

    stem = Path(request.model).stem
    files["README.md"] = _readme_with_cpu_files((out / "README.md").read_text(), stem)
    full = full_model(part, network.name)
    (out / f"{stem}_with_cpu.onnx").write_bytes(full.SerializeToString(deterministic=True))
    for name, body in files.items():
        (out / name).write_text(body)
    return text + summary, report_json


def _readme_with_cpu_files(readme: str, stem: str) -> str:
    """The project README's file table with the CPU files (issue 35: it listed only
    the accelerator's)."""
    rows = ("| `cpu_layers.c`, `cpu_layers.h` | the layers the accelerator refuses, run on "
            "the Arm core (generated C99, bit-exact with the reference) |\n"
            "| `cpu_io.c`, `cpu_io.h` | the glue: the CPU layers' input and output in the "
            "accelerator's data memory, and the known answer of the final output |\n"
            f"| `{stem}_with_cpu.onnx` | the whole model as split: the CPU layers and the "
            "accelerator's, the reference of the known-answer test |\n")
    anchor = "| `README.md` | this file |"
    if anchor not in readme:
        raise AssertionError("the README template lost its file table")
    return readme.replace(anchor, rows + anchor, 1)


__all__ = ["add_cpu_files"]
