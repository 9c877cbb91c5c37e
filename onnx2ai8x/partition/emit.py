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
    """The accelerator part's network and placement, as the conversion made them."""
    from ..convert import plan

    fifo = bool(request.options.get("fifo") or request.options.get("fast_fifo"))
    result = plan(request.model, request.device, request.sidecar, fifo=fifo,
                  overlap_data=bool(request.options.get("overlap_data")))
    return result.network, result.placement


def _input_words(request, network, placement, main_text: str):
    """Per input array of main.c: a function from an input tensor to its words."""
    from ..emit.memory import input_loads

    if "fifo_0" not in main_text:
        return lambda s: [w for _, w in input_loads(network, placement, s)]
    from ..emit.project import fifo_feed
    from ..map.hw import derive
    from ..options import EmitOptions

    options = EmitOptions.from_cli(**request.options)
    if not options.uses_fifo:
        import dataclasses

        options = dataclasses.replace(options, fifo=True)
    hw = derive(placement, options)
    return lambda s: list(fifo_feed(hw, s).words)


def _head_reads(network, placement, shape):
    from ..emit.unload import _check_entries, known_answer_layers
    from .datamem import output_locations

    layers = known_answer_layers(placement)
    if len(layers) != 1 or network.layers[layers[0]].output_width != 8:
        raise Ai8xError("partition.head-input", network.layers[layers[-1]].name,
                        "the CPU head reads one 8-bit accelerator output",
                        "end the accelerator's part in one layer")
    ll = layers[0]
    return output_locations(lambda v: _check_entries(network, placement, ll, v), shape)


def add_cpu_files(request, joined, result) -> tuple[str, str]:
    """Write the CPU files into the project at request.output; the summary and
    report.json with the split."""
    from ..cpu import cgen
    from . import glue
    from .datamem import pack_runs, probe_words
    from .report import cpu_report

    part = joined.part
    out = Path(request.output)
    network, placement = _placed(request)
    main = (out / "main.c").read_text()
    segments = [s for s in (part.stem, part.head) if s is not None]
    files = dict(cgen.render(segments))
    packs, counts, reads = [], [], None
    if part.stem is not None:
        words_of = _input_words(request, network, placement, main)
        maps = probe_words(words_of, tuple(network.input_shape))
        packs = [pack_runs(m) for m in maps]
        counts = [m.shape[0] for m in maps]
    if part.head is not None:
        reads = _head_reads(network, placement, joined.acc_output.shape)
    final = np.asarray(joined.final).reshape(-1)
    files.update(glue.render(
        stem_sample=None if part.stem is None else joined.sample,
        stem_out_size=int(np.prod(network.input_shape)), packs=packs, word_counts=counts,
        head_in_size=int(joined.acc_output.size), reads=reads,
        head_expected=final if part.head is not None else None,
        head_ctype="int32_t" if final.dtype.kind == "i" and
        part.head is not None and part.head.ops[-1].out_dtype != "int8" else "int8_t"))
    files["main.c"] = glue.patch_main(main, len(counts), part.stem is not None,
                                      part.head is not None)
    text, data = cpu_report(part, result)
    report = json.loads(result.report_json)
    report["partition"] = data
    report_json = json.dumps(report, indent=2, sort_keys=True) + "\n"
    files["report.json"] = report_json
    from .reference import full_model

    stem = Path(request.model).stem
    full = full_model(part, network.name)
    (out / f"{stem}_with_cpu.onnx").write_bytes(full.SerializeToString(deterministic=True))
    for name, body in files.items():
        (out / name).write_text(body)
    return text + result.summary, report_json


__all__ = ["add_cpu_files"]
