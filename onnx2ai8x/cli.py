"""The `onnx2ai8x` command line.

The main form converts a model: `onnx2ai8x MODEL.onnx --device MAX78000`. Subcommands:
`check`, `sidecar`, `run`, `import-izer`. Every user error is rendered as one message and
an exit code (0 ok, 1 invalid model or limits, 2 usage); no traceback reaches a user.
"""
# No `from __future__ import annotations` here: Typer would have to eval every string
# annotation on each run (about 10 ms of start-up, issue 5).

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from . import __version__
from .errors import EXIT_INVALID, EXIT_USAGE, Ai8xError
from .fsutil import check_array_output, check_output
from .quantize.guard import HELP as LOSS_HELP

SUBCOMMANDS = ("convert", "check", "sidecar", "run", "import-izer", "quantize",
               "verify")


def _new_app() -> typer.Typer:
    return typer.Typer(
        add_completion=False,
        no_args_is_help=True,
        rich_markup_mode=None,
        help=(
            "ONNX in, MAX78000/MAX78002 C project out.\n\n"
            "Examples:\n\n"
            "  onnx2ai8x model.onnx --device MAX78000\n\n"
            "  onnx2ai8x check model.onnx --device MAX78002\n\n"
            "  onnx2ai8x run model.onnx --input x.npy -o y.npy\n\n"
            "  onnx2ai8x float.onnx --device MAX78000 --calibration x.npy\n\n"
            "  onnx2ai8x verify model/ --model model.onnx\n\n"
            "  onnx2ai8x import-izer --config-file net.yaml --checkpoint-file q.pth.tar "
            "--sample sample.npy --device MAX78000 -o net.onnx\n\n"
            "Every command takes --json (one JSON document on stdout, errors included) and "
            "--quiet (errors only); --debug (or ONNX2AI8X_DEBUG=1) shows the traceback of "
            "an internal error."
        ),
    )


def ModelArg(help: str):  # noqa: N802 - reads as the annotation it makes
    """The model argument every command but verify and import-izer takes first."""
    return Annotated[Path, typer.Argument(metavar="MODEL.onnx", help=help)]


def OutputFileOpt(help: str, required: bool = False):  # noqa: N802
    """`--output/-o` of a command that writes one file."""
    return Annotated[Path if required else Path | None,
                     typer.Option("--output", "-o", help=help)]


DeviceOpt = Annotated[str | None, typer.Option(
    "--device", "-d", help="Target device: MAX78000 or MAX78002 (default: the one the "
    "model names in its ai8x.device metadata; there is no other default).")]
RequiredDeviceOpt = Annotated[str, typer.Option(
    "--device", "-d", help="Target device: MAX78000 or MAX78002.")]
SidecarOpt = Annotated[Path | None, typer.Option(
    "--sidecar", help="Full or partial network description (vendor YAML); "
                      "only what it leaves out is inferred.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print errors only.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]
CalibrationOpt = Annotated[Path | None, typer.Option(
    "--calibration", help="Float samples (.npy, N x the model's input shape) to quantize "
                          "a standard float ONNX model with; not needed for an export of "
                          "integer weights (the vendor's).")]
LabelsOpt = Annotated[Path | None, typer.Option(
    "--labels", help="Class labels of the calibration samples (.npy): the report adds "
                     "float and quantized accuracy.")]
MethodOpt = Annotated[str | None, typer.Option(
    "--calibration-method", help="Activation ranges: mse (default), max or percentile.")]
PercentileOpt = Annotated[float | None, typer.Option(
    "--percentile", help="Percentile for --calibration-method percentile (99.99).")]
ShiftQuantileOpt = Annotated[float | None, typer.Option(
    "--shift-quantile", help="The vendor QAT policy's shift_quantile (default 1) for a "
                             "vendor QAT export: its ONNX computes the shift from the "
                             "maximum, the vendor's quantize.py from this quantile.")]
WeightBitsOpt = Annotated[Path | None, typer.Option(
    "--weight-bits", help="YAML of per-layer weight bits (`layer: 4`, `default: 8`).")]
AcceptLossOpt = Annotated[bool, typer.Option("--accept-loss", help=LOSS_HELP)]
CpuFallbackOpt = Annotated[bool, typer.Option(
    "--cpu-fallback", help="Layers the accelerator refuses run on the Arm core: a float "
    "model (with --calibration) is split into a CPU stem, the accelerator's part and a CPU "
    "head (issue 28).")]
CpuTailOpt = Annotated[bool, typer.Option(
    "--cpu-tail", help="The model's final Softmax, LogSoftmax or Sigmoid, which the "
    "accelerator does not compute, is applied by your application (the project's README "
    "and main.c say so); without it such a model is refused.")]
OverwriteFileOpt = Annotated[bool, typer.Option(
    "--overwrite", help="Replace an existing output file (never an input).")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"onnx2ai8x {__version__}")
        raise typer.Exit(0)


def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """ONNX in, MAX78000/MAX78002 C project out."""


def _device(name: str | None, model: Path | None = None):
    """The device named on the command line, else the one `model` names (ai8x.device),
    resolved once here (an unknown name, or none at all, is a usage error: there is no
    default); every stage below takes the Device itself."""
    if model is None:
        from .devices import get_device

        return get_device(name)
    from .api import device_for

    return device_for(model, name)


# convert's options, declared once here so the command's signature stays one line per
# option (Typer reads them from the annotations).
OutputDirOpt = Annotated[Path | None, typer.Option(
    "--output", "-o", help="Output directory (default: next to the model, named after it).")]
SampleOpt = Annotated[Path | None, typer.Option(
    "--sample-input", help="Sample input (.npy) for the known-answer test; a deterministic "
                           "one is generated when omitted.")]
OverwriteDirOpt = Annotated[bool, typer.Option("--overwrite",
                                               help="Replace an existing output directory.")]
FifoOpt = Annotated[bool, typer.Option("--fifo", help="Use FIFOs to load streaming input.")]
FastFifoOpt = Annotated[bool, typer.Option(
    "--fast-fifo", help="Feed the input through the RISC-V core's fast FIFO (needs --riscv, "
                        "implies --fifo; at most 1 CHW or 4 HWC input channels, 8-bit output "
                        "of the first layer).")]
SoftmaxOpt = Annotated[bool, typer.Option("--softmax", help="Add softmax.c.")]
MlatorOpt = Annotated[bool, typer.Option(
    "--mlator", help="Unload 8-bit outputs through the mlator (a word per four pixels).")]
OverlapOpt = Annotated[bool, typer.Option(
    "--overlap-data", help="Let a sidecar write a layer's output over its own input (refused "
                           "without it, as by the vendor's tool); onnx2ai8x checks that the "
                           "accelerator's read/write order keeps every input it still needs.")]
NoUnloadOpt = Annotated[bool, typer.Option(
    "--no-unload", help="Do not generate cnn_unload() (read the outputs from data memory "
                        "yourself).")]
ZeroSramOpt = Annotated[bool, typer.Option(
    "--zero-sram", help="Zero the data, kernel and bias memories in cnn_init with their "
                        "built-in self-tests (cnn_init fails on a test error); implied "
                        "for a network with a data buffer.")]
NoKatOpt = Annotated[bool, typer.Option(
    "--no-kat", help="Leave the known-answer test out of main.c.")]
ChecklinesOpt = Annotated[int | None, typer.Option(
    "--max-checklines", help="Compare at most this many output words in the known-answer "
                             "test (1 or more).")]
OversizeOpt = Annotated[bool, typer.Option(
    "--allow-oversize", help="Write the project even when its firmware is estimated not "
                             "to fit the part's flash or SRAM.")]
NewLoaderOpt = Annotated[bool, typer.Option(
    "--new-kernel-loader", help="Load kernels with the SDK's newer loader (the default; "
                                "accepted for the vendor's command line).")]
TimerOpt = Annotated[int | None, typer.Option(
    "--timer", help="Time the inference with timer TMR0-TMR3 (0 to 3) and print it.")]
BoostOpt = Annotated[str | None, typer.Option(
    "--boost", help="Switch the CNN boost circuit on through GPIO PORT.PIN during inference, "
                    "e.g. 2.5.")]
RiscvOpt = Annotated[bool, typer.Option(
    "--riscv", help="Dual-core project: the Arm core starts the RISC-V core, which runs the "
                    "network (main_riscv.c); building it needs the RISC-V toolchain, `make "
                    "RISCV_LOAD=0` builds the Arm half.")]
CompactOpt = Annotated[bool, typer.Option(
    "--compact-weights", help="Accepted for the vendor's command line; SDK projects always "
                              "copy the packed weight table.")]
MexpressOpt = Annotated[bool | None, typer.Option(
    "--mexpress/--no-mexpress", help="Load kernels with express (fast) memory writes "
                                     "(default: on).")]
RoundingOpt = Annotated[bool, typer.Option(
    "--avg-pool-rounding", help="Round average pooling to nearest (the model must round too; "
                                "a model exported with rounding implies it).")]
BoardOpt = Annotated[str | None, typer.Option(
    "--board", help="SDK board the project is set up for: EvKit_V1 (default) or FTHR_RevA "
                    "(MAX78000).")]
BuildOpt = Annotated[bool, typer.Option(
    "--build", help="Build the written project with the MSDK and the Arm toolchain "
                    "(arm-none-eabi-gcc, make; with --riscv also a RISC-V toolchain) and "
                    "report its flash and SRAM use.")]
MaximPathOpt = Annotated[Path | None, typer.Option(
    "--maxim-path", help="The MSDK for --build (default: $MAXIM_PATH, or the SDK tree the "
                         "output directory sits in).")]
VerifyOpt = Annotated[bool, typer.Option(
    "--verify", help="Run the written project's known-answer test on the functional "
                     "accelerator model (see `onnx2ai8x verify`).")]

# EmitOptions fields convert_cmd passes on as they are (EmitOptions.from_cli checks them)
EMIT_FLAGS = ("fifo", "fast_fifo", "softmax", "mlator", "overlap_data", "no_unload", "no_kat",
              "max_checklines", "allow_oversize", "new_kernel_loader", "timer", "boost", "riscv",
              "compact_weights", "mexpress", "avg_pool_rounding", "board", "zero_sram")

# ---- power, clock and run-mode options (issue 29; the vendor's spelling and defaults)
PipelineOpt = Annotated[bool | None, typer.Option(
    "--pipeline/--no-pipeline", help="MAX78002: run the accelerator with its pipeline "
                                     "(default: on where the part has it).")]
PllOpt = Annotated[bool | None, typer.Option(
    "--pll/--no-pll", help="MAX78002: clock the accelerator from the IPLL (200 MHz; "
                           "default) or from the APB clock (--no-pll).")]
MaxSpeedOpt = Annotated[bool, typer.Option(
    "--max-speed", help="Load weights and input at the inference clock, as fast as "
                        "possible (needs --pll; default: load at a quarter of it).")]
BalanceSpeedOpt = Annotated[bool, typer.Option(
    "--balance-speed", help="Load weights and input at a quarter of the PLL rate, infer "
                            "at the full rate (the default).")]
ClockDividerOpt = Annotated[int | None, typer.Option(
    "--clock-divider", help="Accelerator clock divider: 1, 2, 4, 8 or 16 (default: 1 "
                            "with the pipeline, else the lowest that keeps 50 MHz).")]
DeepsleepOpt = Annotated[bool, typer.Option(
    "--deepsleep", help="With --riscv: the Arm core waits in low-power mode.")]
PowerdownOpt = Annotated[bool, typer.Option(
    "--powerdown", help="Power down the memories of unused quadrants during inference.")]
NoWfiOpt = Annotated[bool, typer.Option(
    "--no-wfi", help="Spin on the completion flag instead of sleeping (WFI).")]
OneShotOpt = Annotated[bool, typer.Option(
    "--one-shot", help="MAX78002: run one layer per cnn_continue() (layer by layer).")]
ForeverOpt = Annotated[bool, typer.Option(
    "--forever", help="After the known-answer test, run the inference in an endless "
                      "loop.")]
FifoGoOpt = Annotated[bool, typer.Option(
    "--fifo-go", help="MAX78002, streaming: start processing before the first FIFO "
                      "word.")]
NoFifoWaitOpt = Annotated[bool, typer.Option(
    "--no-fifo-wait", help="Push FIFO words without checking for space (the source must "
                           "keep pace with the inference).")]
FastFifoQuadOpt = Annotated[bool, typer.Option(
    "--fast-fifo-quad", help="Fast FIFO in quad fan-out mode: each word reaches all four "
                             "quadrants, which compute the first layer's output channels "
                             "four at a time (implies --fast-fifo; needs --riscv).")]
RiscvDebugOpt = Annotated[bool, typer.Option(
    "--riscv-debug", help="The RISC-V core sets up its JTAG debug port (implies "
                          "--riscv).")]
RiscvExclusiveOpt = Annotated[bool, typer.Option(
    "--riscv-exclusive", help="Exclusive SRAM access for the RISC-V core (implies "
                              "--riscv).")]
RiscvCacheOpt = Annotated[bool, typer.Option(
    "--riscv-cache", help="RISC-V instruction cache on (implies --riscv; always on in "
                          "an SDK project).")]
RiscvFlashOpt = Annotated[bool, typer.Option(
    "--riscv-flash", help="RISC-V kernels and input from flash (implies --riscv; the "
                          "default of an SDK project).")]
EnergyOpt = Annotated[bool, typer.Option(
    "--energy", help="Energy measurement: 100 runs each of weight load, input load and "
                     "inference between the EVKit power monitor's triggers (replaces "
                     "--timer).")]

POWER_FLAGS = ("pipeline", "pll", "max_speed", "balance_speed", "clock_divider", "deepsleep",
               "powerdown", "no_wfi", "one_shot", "forever", "fifo_go", "no_fifo_wait",
               "fast_fifo_quad", "riscv_debug", "riscv_exclusive", "riscv_cache",
               "riscv_flash", "energy")
EMIT_FLAGS += POWER_FLAGS


@dataclass(frozen=True)
class ConvertArgs:
    """The convert command's arguments, as one value (see convert_cmd)."""

    model: Path
    device: str | None
    output: Path | None
    sidecar: Path | None
    sample_input: Path | None
    overwrite: bool
    options: dict  # EMIT_FLAGS -> value
    build: bool
    maxim_path: Path | None
    calibration: Path | None
    labels: Path | None
    calibration_method: str | None
    percentile: float | None
    weight_bits: Path | None
    accept_loss: bool
    shift_quantile: float | None
    verify: bool
    quiet: bool
    cpu_fallback: bool
    json_out: bool
    cpu_tail: bool

    @classmethod
    def from_cli(cls, **kw: object) -> "ConvertArgs":
        options = {k: kw.pop(k) for k in EMIT_FLAGS}
        return cls(options=options, **kw)  # type: ignore[arg-type]

    @property
    def out(self) -> Path:
        return self.output if self.output is not None else self.model.with_suffix("")

    @property
    def progress(self) -> bool:
        return not (self.quiet or self.json_out)


def convert_cmd(
    model: ModelArg("ai8x-ONNX model to convert (or a standard float model, with "
                    "--calibration)."),
    device: DeviceOpt = None,
    output: OutputDirOpt = None,
    sidecar: SidecarOpt = None,
    sample_input: SampleOpt = None,
    overwrite: OverwriteDirOpt = False,
    fifo: FifoOpt = False,
    fast_fifo: FastFifoOpt = False,
    softmax: SoftmaxOpt = False,
    mlator: MlatorOpt = False,
    overlap_data: OverlapOpt = False,
    no_unload: NoUnloadOpt = False,
    no_kat: NoKatOpt = False,
    max_checklines: ChecklinesOpt = None,
    allow_oversize: OversizeOpt = False,
    new_kernel_loader: NewLoaderOpt = False,
    timer: TimerOpt = None,
    boost: BoostOpt = None,
    riscv: RiscvOpt = False,
    compact_weights: CompactOpt = False,
    mexpress: MexpressOpt = None,
    avg_pool_rounding: RoundingOpt = False,
    board: BoardOpt = None,
    zero_sram: ZeroSramOpt = False,
    pipeline: PipelineOpt = None,
    pll: PllOpt = None,
    max_speed: MaxSpeedOpt = False,
    balance_speed: BalanceSpeedOpt = False,
    clock_divider: ClockDividerOpt = None,
    deepsleep: DeepsleepOpt = False,
    powerdown: PowerdownOpt = False,
    no_wfi: NoWfiOpt = False,
    one_shot: OneShotOpt = False,
    forever: ForeverOpt = False,
    fifo_go: FifoGoOpt = False,
    no_fifo_wait: NoFifoWaitOpt = False,
    fast_fifo_quad: FastFifoQuadOpt = False,
    riscv_debug: RiscvDebugOpt = False,
    riscv_exclusive: RiscvExclusiveOpt = False,
    riscv_cache: RiscvCacheOpt = False,
    riscv_flash: RiscvFlashOpt = False,
    energy: EnergyOpt = False,
    build: BuildOpt = False,
    maxim_path: MaximPathOpt = None,
    calibration: CalibrationOpt = None,
    labels: LabelsOpt = None,
    calibration_method: MethodOpt = None,
    percentile: PercentileOpt = None,
    weight_bits: WeightBitsOpt = None,
    accept_loss: AcceptLossOpt = False,
    shift_quantile: ShiftQuantileOpt = None,
    verify: VerifyOpt = False,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
    cpu_fallback: CpuFallbackOpt = False,
    cpu_tail: CpuTailOpt = False,
) -> None:
    """Convert MODEL.onnx into a C project for the vendor SDK.

    Example: onnx2ai8x model.onnx --device MAX78000 --sample-input x.npy --softmax

    Example: onnx2ai8x model.onnx --device MAX78000 --build --maxim-path ~/MaximSDK
    """
    # every parameter is an option value: hand them on as one record
    args = ConvertArgs.from_cli(**locals())
    dev = _device(args.device, args.model)
    sdk = _build_sdk(args) if args.build else None
    from .console import heartbeat

    # calibration takes seconds to minutes; a terminal has the progress bar's clock
    with heartbeat("converting (calibrating the float model)",
                   args.progress and args.calibration is not None and not sys.stderr.isatty()):
        result = _convert(args, dev)
    if result.quant_table is not None and args.progress:
        typer.echo(result.quant_table)  # a float model: how it was quantized, every path
    _warn(result.warnings, args.quiet)
    built = None
    if args.build:
        from .emit.build import build_project

        with heartbeat(f"building the firmware with make in {args.out}", args.progress):
            built = build_project(args.out, dev, board=result.board, maxim_path=sdk)
    checked = _verify_written(result) if args.verify else None
    _print_convert(args, dev, result, built, checked)
    if checked is not None:
        _print_verified(args, checked)


def _build_sdk(args: ConvertArgs):
    """--build checked before any work: its tools and SDK (returned) are there, so a
    build that cannot run leaves no project behind."""
    from .emit.build import check_build_tools, find_sdk

    check_build_tools(riscv=args.options["riscv"])
    sdk = find_sdk(args.maxim_path, args.out)
    if sdk is not None:
        from .makepath import check_make_path

        check_make_path(sdk, "MSDK", "an SDK directory (--maxim-path, MAXIM_PATH)")
    return sdk


def _convert(args: ConvertArgs, dev):
    """The conversion: one call of the Python API, which takes every decision (model
    kind, calibration, vendor-export recovery, CPU fallback) and checks every input."""
    from . import api

    return api.convert(
        args.model, dev, args.out, sidecar=args.sidecar, sample=args.sample_input,
        overwrite=args.overwrite, calibration=args.calibration,
        calibration_method=args.calibration_method, percentile=args.percentile,
        weight_bits=args.weight_bits, labels=args.labels, accept_loss=args.accept_loss,
        shift_quantile=args.shift_quantile, cpu_fallback=args.cpu_fallback,
        cpu_tail=args.cpu_tail, progress=args.progress, **args.options)


def _print_convert(args: ConvertArgs, dev, result, built, checked=None) -> None:
    """The summary, or with --json one JSON document: the report, where the project was
    written (`project`), the firmware sizes (--build) and the verdict (--verify)."""
    if args.json_out:
        data = json.loads(result.report_json)
        data["project"] = str(args.out)
        if built is not None:
            data["firmware"] = {"elf": str(built.elf), "target": built.target,
                                "board": built.board, "text": built.sizes.text,
                                "data": built.sizes.data, "bss": built.sizes.bss,
                                "flash_bytes": dev.flash_bytes, "sram_bytes": dev.sram_bytes}
            if built.riscv is not None:
                rv = built.riscv
                data["firmware"]["riscv"] = {
                    "elf": str(rv.elf), "text": rv.sizes.text, "data": rv.sizes.data,
                    "bss": rv.sizes.bss, "flash": rv.flash, "sram": rv.sram}
        if checked is not None:
            data["verify"] = checked.data
            if not checked.passed:  # the project is written; the outcome is not a PASS
                data.update(ok=False, exit_code=checked.exit_code)
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
    elif not args.quiet:
        typer.echo(result.summary)
        typer.echo(f"wrote {args.out}")
        if built is not None:
            from .emit.build import describe

            typer.echo(describe(built, dev))


def _verify_written(result):
    """--verify: the written project on the virtual accelerator (the result; printed
    by _print_verified, or inside the JSON document with --json)."""
    from . import api

    # The project's annotated copy is the ai8x-ONNX it was built from (for a float model,
    # the quantized one), so the layer-by-layer reference can run on it. A project whose
    # snoop units choose the layer order is run along the order its known answer assumes.
    return api.verify(result.output, model=result.model_file,
                      layer_order=result.layer_order)


def _print_verified(args: ConvertArgs, checked) -> None:
    if args.json_out:
        pass  # in the JSON document already
    elif not args.quiet or not checked.passed:
        typer.echo(checked.text, err=not checked.passed)
    elif "assumed_layer_order" in checked.data:
        # a PASS that holds for one order only is said even under --quiet
        steps = " -> ".join(map(str, checked.data["assumed_layer_order"]))
        typer.echo(f"note[verify.assumed-order] verify assumed the layer order {steps} "
                   "(the sidecar's simulated_sequence): the snoop units that choose it are "
                   "not modelled",
                   err=True)
    if not checked.passed:
        raise typer.Exit(checked.exit_code)


def _warn(warnings: tuple[str, ...], quiet: bool = False) -> None:
    """Warnings and notes go to stderr (under --json too: stdout holds the document),
    except under --quiet, which means errors only. Each carries its code
    (`warning[code]`)."""
    from .errors import plain

    if quiet:
        return
    for text in warnings:
        typer.echo(plain(text), err=True)


def check_cmd(
    model: ModelArg("ai8x-ONNX model to check (or a standard float model, with "
                    "--calibration)."),
    device: DeviceOpt = None,
    sidecar: SidecarOpt = None,
    overlap_data: OverlapOpt = False,
    calibration: CalibrationOpt = None,
    calibration_method: MethodOpt = None,
    percentile: PercentileOpt = None,
    weight_bits: WeightBitsOpt = None,
    accept_loss: AcceptLossOpt = False,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
    cpu_tail: CpuTailOpt = False,
) -> None:
    """Legalize and map MODEL.onnx; print diagnostics and the summary only.

    A float model is quantized first exactly as `convert --calibration` does (the same
    front end: read, quantize, rewrite, legalize, the loss check), so both agree.

    Example: onnx2ai8x check model.onnx --device MAX78002 --json
    """
    from .api import check
    from .console import heartbeat

    with heartbeat("checking (calibrating the float model)",
                   calibration is not None and not (quiet or json_out)):
        result = check(model, _device(device, model), sidecar=sidecar,
                       calibration=calibration, calibration_method=calibration_method,
                       percentile=percentile, weight_bits=weight_bits,
                       accept_loss=accept_loss, overlap_data=overlap_data,
                       onnx_checker=True, cpu_tail=cpu_tail)
    _warn(result.warnings, quiet)
    if json_out:
        typer.echo(result.report_json)
    elif not quiet:
        typer.echo(result.summary)
        typer.echo("ok: the model fits the device")


def sidecar_cmd(
    model: ModelArg("ai8x-ONNX model (or a standard float model, with --calibration)."),
    device: DeviceOpt = None,
    output: OutputFileOpt("Where to write the YAML (default: stdout).") = None,
    sidecar: SidecarOpt = None,
    overlap_data: OverlapOpt = False,
    calibration: CalibrationOpt = None,
    calibration_method: MethodOpt = None,
    percentile: PercentileOpt = None,
    weight_bits: WeightBitsOpt = None,
    accept_loss: AcceptLossOpt = False,
    overwrite: OverwriteFileOpt = False,
    cpu_tail: CpuTailOpt = False,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Write the inferred network description (sidecar YAML) only.

    A float model is quantized first as `convert --calibration` does, so the sidecar is
    the one the conversion writes into the project.

    Example: onnx2ai8x sidecar model.onnx --device MAX78000 -o model.yaml
    """
    from .api import check
    from .fsutil import write_text_atomic

    dev = _device(device, model)
    if output is not None:
        check_output(output, (model, sidecar, calibration, weight_bits), directory=False,
                     overwrite=overwrite, kind="sidecar")
    result = check(model, dev, sidecar=sidecar, calibration=calibration,
                   calibration_method=calibration_method, percentile=percentile,
                   weight_bits=weight_bits, accept_loss=accept_loss,
                   overlap_data=overlap_data, cpu_tail=cpu_tail)
    _warn(result.warnings, quiet)
    if output is not None:
        write_text_atomic(output, result.sidecar)
    if json_out:
        typer.echo(_json_dumps({"sidecar": result.sidecar,
                                "output": None if output is None else str(output)}))
    elif output is None:
        typer.echo(result.sidecar, nl=False)
    elif not quiet:
        typer.echo(f"wrote {output}")


def run_cmd(
    model: ModelArg("ai8x-ONNX model."),
    input: Annotated[Path, typer.Option("--input", "-i",
                                        help="Input sample (.npy): integers in "
                                             "[-128, 127], (C,H,W), (C,L) or with a "
                                             "batch dimension.")],
    output: OutputFileOpt("Where to write the result (.npy, or .npz with one array per "
                          "graph output when there are several).") = None,
    overwrite: OverwriteFileOpt = False,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Run MODEL.onnx bit-exactly on onnxruntime with the ai8x kernels.

    Example: onnx2ai8x run model.onnx --input x.npy -o y.npy
    """
    import numpy as np

    from .api import run
    from .fsutil import save_arrays_atomic

    if output is not None:
        check_output(output, (model, input), directory=False, overwrite=overwrite,
                     kind="array")
        check_array_output(output)
    outputs = run(model, input)
    if output is not None:
        save_arrays_atomic(output, list(outputs), list(outputs.values()))
    if json_out:
        typer.echo(_json_dumps({
            "outputs": {name: {"shape": list(arr.shape), "dtype": str(arr.dtype),
                               "values": arr.tolist()} for name, arr in outputs.items()},
            "output": None if output is None else str(output)}))
    elif output is None:
        for name, arr in outputs.items():
            typer.echo(f"{name}: shape {tuple(arr.shape)} dtype {arr.dtype}")
            typer.echo(np.array2string(arr, threshold=64))
    elif not quiet:
        typer.echo(f"wrote {output} ({', '.join(outputs)})")


def import_izer_cmd(
    config_file: Annotated[Path, typer.Option("--config-file",
                                              help="Network description (vendor "
                                                   "YAML).")],
    checkpoint_file: Annotated[Path, typer.Option("--checkpoint-file",
                                                  help="Quantized checkpoint "
                                                       "(.pth.tar).")],
    device: RequiredDeviceOpt,
    output: OutputFileOpt("ONNX file to write.", required=True) = Path("model.onnx"),
    sample: Annotated[Path | None, typer.Option(
        "--sample", help="Sample input (.npy) giving the input shape.")] = None,
    overwrite: OverwriteFileOpt = False,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Import a vendor project (sidecar YAML + quantized checkpoint) into ai8x-ONNX.

    Example: onnx2ai8x import-izer --config-file net.yaml --checkpoint-file net-q.pth.tar
    --sample sample_net.npy --device MAX78000 -o net.onnx
    """
    from .api import import_izer

    import_izer(config_file, checkpoint_file, _device(device), sample=sample,
                output=output, overwrite=overwrite)
    if json_out:
        typer.echo(_json_dumps({"output": str(output)}))
    elif not quiet:
        typer.echo(f"wrote {output}")


def quantize_cmd(
    model: ModelArg("Standard float ONNX model."),
    output: OutputFileOpt("ai8x-ONNX file to write.", required=True),
    calibration: CalibrationOpt = None,
    device: DeviceOpt = None,
    labels: LabelsOpt = None,
    calibration_method: MethodOpt = None,
    percentile: PercentileOpt = None,
    weight_bits: WeightBitsOpt = None,
    accept_loss: AcceptLossOpt = False,
    shift_quantile: ShiftQuantileOpt = None,
    report: Annotated[Path | None, typer.Option(
        "--report", help="Where to save the report (default: beside the output, "
                         "named after it: q.onnx -> q.report.json).")] = None,
    overwrite: OverwriteFileOpt = False,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
    cpu_tail: CpuTailOpt = False,
) -> None:
    """Quantize a float ONNX model (any exporter) into ai8x-ONNX with calibration data.

    Example: onnx2ai8x quantize model.onnx --calibration x.npy -o model-q.onnx
    """
    from .api import quantize
    from .console import heartbeat

    with heartbeat("quantizing with the calibration data", not (quiet or json_out)):
        result = quantize(model, _device(device, model), calibration=calibration,
                          output=output, report=report,
                          overwrite=overwrite, labels=labels,
                          calibration_method=calibration_method, percentile=percentile,
                          weight_bits=weight_bits, accept_loss=accept_loss,
                          shift_quantile=shift_quantile, cpu_tail=cpu_tail)
    _warn(result.warnings, quiet)
    if json_out:
        data = json.loads(result.report_json)
        # where they were written
        data.update(output=str(result.output), report=str(result.report_file))
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
    elif not quiet:
        typer.echo(result.table)
        typer.echo(f"wrote {result.output} and {result.report_file}")


def verify_cmd(
    project: Annotated[Path, typer.Argument(metavar="PROJECT",
                                            help="Generated C project directory.")],
    model: Annotated[Path | None, typer.Option(
        "--model", help="The ONNX model of the project: on a failure, run the reference "
                        "layer by layer and name the first layer whose output "
                        "differs.")] = None,
    stop_after: Annotated[int | None, typer.Option(
        "--stop-after", min=0, metavar="N",
        help="Stop after layer N and write its output as it sits "
                                    "in data memory (.memory.txt) and as a tensor "
                                    "(.npy).")] = None,
    output: OutputFileOpt("Directory for the --stop-after files (default: "
                          "PROJECT/verify-layerN).") = None,
    layer_order: Annotated[str | None, typer.Option(
        "--layer-order", metavar="L0,L1,...",
        help="For a project whose snoop units choose the layer order (MAX78002): the "
             "hardware layers in the order its known answer assumes, e.g. 0,3,4. The "
             "layers run in that order and the verdict holds for it; each step must be "
             "the next layer or the next-layer field's target.")] = None,
    quiet: QuietOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Run PROJECT's known-answer test on a functional model of the accelerator.

    Reads only the C project (cnn.c, weights.h, sampledata.h, sampleoutput.h, main.c),
    executes its register writes and memory loads, runs the layers, and checks the
    project's own expected output: PASS (exit 0) or FAIL with the first differing word
    (exit 1). A project using a feature the model does not execute gets NOT MODELLED
    (exit 3), never PASS or FAIL: the MAX78002's snoop units choose the layer order at
    run time, so such a project is run only along an order stated with --layer-order.

    Example: onnx2ai8x verify examples/digits/digits

    Example: onnx2ai8x verify mynet/ --model mynet.onnx --stop-after 3

    Example: onnx2ai8x verify snoopnet/ --layer-order 0,3
    """
    from .api import verify
    from .verification import to_json

    result = verify(project, model=model, stop_after=stop_after, dump=output,
                        layer_order=_layer_order(layer_order))
    if json_out:
        typer.echo(to_json(result))
    elif not quiet or not result.passed:
        typer.echo(result.text)
    if not result.passed:
        raise typer.Exit(result.exit_code)


def _layer_order(text: str | None) -> tuple[int, ...] | None:
    """`--layer-order`'s value: comma-separated layer numbers."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isascii() and p.isdigit() and len(p) <= 3 for p in parts):
        raise Ai8xError("usage.layer-order", "--layer-order",
                        "expected layer numbers separated by commas",
                        "e.g. --layer-order 0,3,4", exit_code=EXIT_USAGE)
    return tuple(int(p) for p in parts)


COMMANDS = {"convert": convert_cmd, "check": check_cmd, "sidecar": sidecar_cmd,
            "run": run_cmd, "import-izer": import_izer_cmd, "quantize": quantize_cmd,
            "verify": verify_cmd}
assert tuple(COMMANDS) == SUBCOMMANDS


class _Command(typer.core.TyperCommand):
    """A command whose usage line shows a required argument as `MODEL.onnx`, not Typer's
    `{MODEL.onnx}` (which reads like a set or a template placeholder)."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p
                for p in super().collect_usage_pieces(ctx)]


def build_app(only: str | None = None) -> typer.Typer:
    """The Typer application; with `only`, just that subcommand (and the root options).

    Typer inspects every registered command's signature on each run (about 5 ms per
    command); a run that names its subcommand needs only that one (issue 5: start-up
    time is most of a conversion).
    """
    app = _new_app()
    app.callback()(_root)
    for name, func in COMMANDS.items():
        if only is None or name == only:
            # the command list shows each docstring's first line whole (Click would cut
            # it at 45 characters)
            app.command(name, cls=_Command,
                        short_help=(func.__doc__ or "").strip().splitlines()[0])(func)
    return app


def _argv_with_default_command(argv: list[str]) -> list[str]:
    """`onnx2ai8x model.onnx ...` means `onnx2ai8x convert model.onnx ...`."""
    if not argv:
        return argv
    first = argv[0]
    if first in SUBCOMMANDS or first.startswith("-"):
        # `--device X model.onnx` also means convert when a model path follows
        if first.startswith("-") and first not in ("--help", "-h", "--version") and any(
                a.endswith(".onnx") for a in argv):
            return ["convert", *argv]
        return argv
    return ["convert", *argv]


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv`; its exit code. Every outcome is reported as
    console.py says (JSON documents under --json, errors only under --quiet, a
    traceback only under --debug, 130 on Ctrl-C)."""
    from . import console

    with console.Interrupts() as interrupts:
        raw, debug = console.take_debug(list(sys.argv[1:] if argv is None else argv))
        args = _argv_with_default_command(raw)
        conv = console.conventions(args, debug)
        try:
            code = _dispatch(raw, args)
            # Typer answers a KeyboardInterrupt inside a command with a bare 130
            return console.report_interrupt(conv) if code == console.EXIT_INTERRUPTED \
                else code
        except Ai8xError as exc:
            return console.report_error(conv, exc)
        except typer.Exit as exc:
            return exc.exit_code
        except typer.Abort as exc:
            return _aborted(conv, exc, interrupts.seen)
        except typer.TyperException as exc:  # usage errors from the command-line parser
            return console.report_usage(conv, exc.format_message(),
                                        getattr(exc, "show", None))
        except KeyboardInterrupt:
            return console.report_interrupt(conv)
        except Exception as exc:  # noqa: BLE001 - last line of defence: no tracebacks for users
            if interrupts.seen:  # what an interrupt broke on its way out
                return console.report_interrupt(conv)
            return console.report_internal(conv, exc, EXIT_INVALID)


def _dispatch(raw: list[str], args: list[str]) -> int:
    """Parse `args` and run the command they name (raises what the command raises)."""
    from .console import mistyped_command

    typo = mistyped_command(raw, SUBCOMMANDS)
    if typo is not None:
        raise typo
    only = args[0] if args and args[0] in COMMANDS else None
    code = build_app(only)(args=args, prog_name="onnx2ai8x", standalone_mode=False)
    if isinstance(code, int) and code:  # typer.Exit(n) inside a command (verify FAIL)
        return code
    return 0


def _aborted(conv, exc: typer.Abort, interrupted: bool) -> int:
    """Click turns a KeyboardInterrupt and an EOFError anywhere below into Abort."""
    from . import console

    if isinstance(exc.__cause__, EOFError) and not interrupted:
        # a reader met the end of a file (empty or truncated) before it expected it
        return console.report_error(conv, Ai8xError(
            "input.truncated", "an input file",
            f"ended early (it is empty or truncated: {str(exc.__cause__)[:200]})",
            "check the files passed on the command line"))
    return console.report_interrupt(conv)


def _json_dumps(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True)


def run() -> None:
    """The `onnx2ai8x` command: main(), then exit without interpreter teardown.

    Tearing down a process that has loaded numpy, onnxruntime, Jinja2 and the rest
    (freeing every module, joining onnxruntime's thread pool) takes about 70 ms, an
    eighth of a conversion (issue 5), and does nothing for the user: every output file
    is written and closed inside main() (atomic directory writes), and nothing here
    registers exit handlers. So the standard streams are flushed and the process
    ends at once. In-process callers (tests, notebooks) use main(), which returns.
    """
    import gc
    import os

    # One short-lived process: the cyclic collector would otherwise re-scan the objects
    # that importing numpy, onnxruntime, Jinja2 and the converter creates several times
    # over (~40 ms, issue 5). Reference counting frees everything else as usual; the
    # collector still runs, after 100,000 net allocations instead of 700.
    gc.set_threshold(100_000, 50, 1000)
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing left to say
            code = code or EXIT_INVALID
    os._exit(code)


if __name__ == "__main__":
    run()
