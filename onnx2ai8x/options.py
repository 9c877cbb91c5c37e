"""Code-generation options (the vendor tool's spelling, seed 000 "Network Loader" options),
and the hardware choices decided from them once (`decide_hardware`).

`EmitOptions` is what the user asked for; `HwChoices` is what the accelerator will do,
decided in one place from those options, the model and its mapping (a streaming first
layer reads the FIFOs, a data buffer needs zeroed memories, the model states how
average pooling rounds, a sidecar programs the snoop units). The mapper, the hardware
view (map/hw.py) and the register program read the choices, never the options.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .devices import Device
from .errors import EXIT_USAGE, Ai8xError


@dataclass(frozen=True)
class EmitOptions:
    """Options that change what the generated C does (or how it is laid out).

    Defaults are the vendor tool's defaults: express kernel loading (`mexpress`) and the
    new kernel loader on, pipeline on where the device has one.
    """

    fifo: bool = False
    fast_fifo: bool = False  # implies fifo
    softmax: bool = False
    mlator: bool = False
    overlap_data: bool = False
    no_unload: bool = False
    no_kat: bool = False
    max_checklines: int | None = None
    new_kernel_loader: bool = True
    timer: int | None = None
    boost: str | None = None
    riscv: bool = False
    # The SDK board the project is set up for (Makefile default, .vscode settings);
    # None: the device's first board (EvKit_V1).
    board: str | None = None
    # Seed 000: "Use memcpy to load weights in order to save code space". A project for
    # the SDK always does: the kernels are the packed KERNELS table copied by a loop
    # (the vendor tool, too, writes the same embedded project with or without the flag;
    # only its RTL-simulation output changes). Accepted, changes nothing.
    compact_weights: bool = False
    mexpress: bool = True
    avg_pool_rounding: bool = False
    pipeline: bool | None = None  # None: on where supported (MAX78002)
    powerdown: bool = False
    simple1b: bool = False
    # MAX78002 conditional execution ("snoop") register values from the sidecar's
    # global `snoop` list (32 values; the first 24 are written).
    snoop: tuple[int, ...] | None = None
    # Zero the data, kernel, TRAM and bias memories with their built-in self-tests in
    # cnn_init (the vendor's --zero-sram); all-zero kernels are then not written.
    zero_sram: bool = False
    # ---- power, clock and run-mode options (issue 29; the vendor's spelling, seed 000
    # "Energy Measurement" and the vendor tool's Power / RISC-V / FIFO option groups)
    pll: bool | None = None  # None: on where the part has an IPLL (MAX78002)
    # Load kernels, bias and input at a quarter of the PLL rate, infer at the full rate
    # (False: --max-speed, everything at the run clock)
    balance_speed: bool = True
    clock_divider: int | None = None  # None: 1 with the pipeline, else the lowest that fits
    deepsleep: bool = False  # the Arm core waits for the RISC-V core in deep sleep
    wfi: bool = True  # False (--no-wfi): spin on the completion flag instead of sleeping
    one_shot: bool = False  # run one layer per cnn_continue() (MAX78002)
    forever: bool = False  # after the known-answer test, infer again in an endless loop
    fifo_go: bool = False  # start processing before the first FIFO word (MAX78002)
    fifo_wait: bool = True  # False (--no-fifo-wait): push without checking FIFO space
    # The fast FIFO writes each word to all four quadrants and the first layer's
    # quadrants each compute every fourth output channel (implies fast_fifo)
    fast_fifo_quad: bool = False
    riscv_debug: bool = False  # the RISC-V core sets up its JTAG debug port
    riscv_exclusive: bool = False  # the RISC-V core gets exclusive SRAM access
    riscv_cache: bool | None = None  # accepted: an SDK RISC-V project always runs cached
    riscv_flash: bool | None = None  # accepted: tables stay in flash (.rodata)
    energy: bool = False  # seed 000 "Energy Measurement": 100x loops, power-monitor triggers

    @property
    def uses_fifo(self) -> bool:
        return self.fifo or self.fast_fifo

    @classmethod
    def from_cli(cls, device: Device | None = None, **kw: object) -> EmitOptions:
        """Options from the converter's command line (None / unset flags keep defaults);
        an Ai8xError (usage) for a value out of its range (OPTION_RULES, and with the
        `device` the part's own ranges, DEVICE_OPTION_RULES)."""
        kw = _negated_flags(kw)
        values = {k: v for k, v in kw.items() if k in cls.__dataclass_fields__ and v is not None}
        # The CLI flag can only switch the new kernel loader on; it is on by default.
        if values.get("new_kernel_loader") is False:
            values.pop("new_kernel_loader")
        options = implied_options(cls(**values))  # type: ignore[arg-type]
        check_options(options)
        if device is not None:
            check_device_options(options, device)
        return options

    @classmethod
    def from_vendor_args(cls, args: list[str]) -> EmitOptions:
        """Options from a vendor command line (golden `vendor_args`)."""
        kw: dict[str, object] = {}
        i = 0
        while i < len(args):
            arg = args[i]
            if arg in ("--timer", "--boost", "--max-checklines", "--clock-divider"):
                value = args[i + 1]
                key = arg[2:].replace("-", "_")
                kw[key] = value if key == "boost" else int(value)
                i += 2
                continue
            flag = arg[2:].replace("-", "_")
            if flag in cls.__dataclass_fields__:
                kw[flag] = True
            elif flag == "no_mexpress":
                kw["mexpress"] = False
            elif flag in VENDOR_NEGATIONS:
                field, value = VENDOR_NEGATIONS[flag]
                kw[field] = value
            i += 1
        return implied_options(cls(**kw))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- power options
# The vendor's negative flags and the field each sets (its command line, option groups
# "Power saving", "Streaming and FIFOs", "RISC-V").
VENDOR_NEGATIONS = {
    "no_pipeline": ("pipeline", False), "no_pll": ("pll", False), "apb": ("pll", False),
    "max_speed": ("balance_speed", False), "no_wfi": ("wfi", False),
    "no_fifo_wait": ("fifo_wait", False), "no_riscv_cache": ("riscv_cache", False),
    "no_riscv_flash": ("riscv_flash", False),
}


def _negated_flags(kw: dict) -> dict:
    """CLI keywords of the negative flags (`no_wfi=True`) as the fields they set.
    --balance-speed is the default; only --max-speed changes it (both: a usage error)."""
    out = dict(kw)
    if out.get("max_speed") and out.get("balance_speed"):
        raise Ai8xError("usage.option", "--max-speed", "contradicts --balance-speed",
                        "give one of the two", exit_code=EXIT_USAGE)
    out.pop("balance_speed", None)
    for flag, (field, value) in VENDOR_NEGATIONS.items():
        if out.pop(flag, None):
            out[field] = value
    return out


def implied_options(options: EmitOptions) -> EmitOptions:
    """What an option implies, as the vendor's command line does: each RISC-V variant
    implies --riscv, --fast-fifo-quad implies --fast-fifo, and --energy replaces --timer
    (the measurement loops bracket the inference with the power-monitor triggers)."""
    changes: dict[str, object] = {}
    if options.riscv_debug or options.riscv_exclusive or options.riscv_cache \
            or options.riscv_flash:
        changes["riscv"] = True
    if options.fast_fifo_quad:
        changes["fast_fifo"] = True
    if options.energy and options.timer is not None:
        changes["timer"] = None
    return dataclasses.replace(options, **changes) if changes else options


def option_warnings(options: EmitOptions, asked: dict) -> tuple[str, ...]:
    """Warnings for options another option overrides (`asked`: the command line's
    values)."""
    if options.energy and asked.get("timer") is not None:
        return ("warning[options.timer-ignored] --timer is ignored with --energy: the "
                "power monitor times the "
                "measurement loops (drop --timer)",)
    return ()


# --------------------------------------------------------------------------- option rules
# One rule per option value the project's C depends on; each docstring is the reason a
# user reads. The ranges that are facts of a part (its timers, its GPIO ports) are
# device rules below.

def max_checklines_rule(options: EmitOptions) -> str | None:
    """--max-checklines is a positive count of the output words the known-answer test
    compares."""
    if options.max_checklines is None or options.max_checklines >= 1:
        return None
    return f"--max-checklines {options.max_checklines}: give a count of 1 or more"


def fast_fifo_rule(options: EmitOptions) -> str | None:
    """--fast-fifo needs --riscv: the fast FIFO is wired to the RISC-V core only (seed
    000, "Fast FIFO"); the Arm core feeds the standard FIFOs (--fifo)."""
    if not options.fast_fifo or options.riscv:
        return None
    return "--fast-fifo: add --riscv, or use --fifo for the Arm core's FIFOs"


# Seed 000 / the vendor's --clock-divider: the CNN clock divider field takes these values.
CLOCK_DIVIDERS = (1, 2, 4, 8, 16)


def clock_divider_rule(options: EmitOptions) -> str | None:
    """--clock-divider is one of the accelerator clock's dividers: 1, 2, 4, 8 or 16."""
    if options.clock_divider is None or options.clock_divider in CLOCK_DIVIDERS:
        return None
    return (f"--clock-divider {options.clock_divider}: use one of "
            f"{', '.join(map(str, CLOCK_DIVIDERS))}")


def deepsleep_rule(options: EmitOptions) -> str | None:
    """--deepsleep puts the Arm core into deep sleep while the RISC-V core runs the
    network; without --riscv the Arm core runs it and cannot sleep that deeply."""
    if not options.deepsleep or options.riscv:
        return None
    return "--deepsleep: add --riscv (the RISC-V core runs the network while the Arm sleeps)"


def one_shot_timer_rule(options: EmitOptions) -> str | None:
    """--one-shot runs the network one layer per cnn_continue(); --timer would time only
    the first layer, so the two do not go together."""
    if not (options.one_shot and options.timer is not None):
        return None
    return "--one-shot: drop --timer (a one-shot run stops after every layer)"


OPTION_RULES = (max_checklines_rule, fast_fifo_rule,
                clock_divider_rule, deepsleep_rule, one_shot_timer_rule)


def check_options(options: EmitOptions) -> None:
    """Every option rule; an Ai8xError (usage) naming the first value out of range."""
    for rule in OPTION_RULES:
        problem = rule(options)
        if problem is not None:
            option, _, message = problem.partition(": ")
            raise Ai8xError("usage.option", option, message,
                            " ".join((rule.__doc__ or "").split()), exit_code=EXIT_USAGE)


# --------------------------------------------------------------------------- device rules
# Options one part does not have (the vendor tool refuses them the same way), and option
# values in a part's own ranges; each takes the options and the Device, and its
# docstring is the reason a user reads.

def timer_rule(options: EmitOptions, device: Device) -> str | None:
    """--timer names one of the part's general-purpose timers (the C uses MXC_TMR<N>;
    another number does not compile)."""
    if options.timer is None or 0 <= options.timer < device.timers:
        return None
    return f"--timer {options.timer}: use a timer from 0 to {device.timers - 1}"


def boost_rule(options: EmitOptions, device: Device) -> str | None:
    """--boost names the GPIO pin that switches the CNN boost circuit as PORT.PIN, a
    port and pin of the part (e.g. 2.5 on the evaluation kit)."""
    if options.boost is None:
        return None
    parts = str(options.boost).split(".")
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        port, pin = int(parts[0]), int(parts[1])
        if port < device.gpio_ports and pin < device.gpio_pins:
            return None
    return (f"--boost `{options.boost}`: give PORT.PIN with port 0 to "
            f"{device.gpio_ports - 1} and pin 0 to {device.gpio_pins - 1}, e.g. 2.5")


def pipeline_rule(options: EmitOptions, device: Device) -> str | None:
    """--pipeline: only MAX78002's accelerator has the pipeline."""
    if not options.pipeline or device.support_pipeline:
        return None
    return f"--pipeline: {device.name} has no accelerator pipeline; drop --pipeline"


def pll_rule(options: EmitOptions, device: Device) -> str | None:
    """--pll: only MAX78002 has the IPLL that can clock the accelerator."""
    if not options.pll or device.pll_mhz:
        return None
    return f"--pll: {device.name} has no IPLL; drop --pll (the APB clock drives the CNN)"


def max_speed_rule(options: EmitOptions, device: Device) -> str | None:
    """--max-speed loads weights and data at the PLL rate: it needs the IPLL (--pll)."""
    if options.balance_speed or uses_pll(options, device):
        return None
    return "--max-speed: needs --pll (MAX78002); drop --max-speed or --no-pll"


def fifo_go_rule(options: EmitOptions, device: Device) -> str | None:
    """--fifo-go (start before the first FIFO word) exists on MAX78002 only."""
    if not options.fifo_go or device.support_fifo_go:
        return None
    return f"--fifo-go: {device.name} cannot start before the first FIFO word; drop it"


def one_shot_rule(options: EmitOptions, device: Device) -> str | None:
    """--one-shot (one layer per cnn_continue()) exists on MAX78002 only."""
    if not options.one_shot or device.support_oneshot:
        return None
    return f"--one-shot: {device.name} has no one-shot mode; drop --one-shot"


def no_pipeline_speed_rule(options: EmitOptions, device: Device) -> str | None:
    """Without the pipeline the accelerator must not run faster than its no-pipeline
    limit (50 MHz): choose a larger --clock-divider or keep the pipeline."""
    if not device.support_pipeline or options.pipeline is not False \
            or options.clock_divider is None:
        return None
    mhz = (device.pll_mhz if uses_pll(options, device) else device.apb_mhz) \
        // options.clock_divider
    if mhz <= device.no_pipeline_mhz:
        return None
    return (f"--clock-divider {options.clock_divider}: {mhz} MHz without the pipeline "
            f"exceeds {device.no_pipeline_mhz} MHz; use a larger divider or drop "
            "--no-pipeline")


DEVICE_OPTION_RULES = (timer_rule, boost_rule, pipeline_rule, pll_rule, max_speed_rule,
                       fifo_go_rule, one_shot_rule, no_pipeline_speed_rule)


def uses_pll(options: EmitOptions, device: Device) -> bool:
    """The accelerator clock comes from the IPLL: by default where the part has one."""
    if options.pll is None:
        return bool(device.pll_mhz)
    return options.pll and bool(device.pll_mhz)


def check_device_options(options: EmitOptions, device: Device) -> None:
    """Every device option rule; an Ai8xError (usage) naming the first option the part
    does not have."""
    for rule in DEVICE_OPTION_RULES:
        problem = rule(options, device)
        if problem is not None:
            option, _, message = problem.partition(": ")
            raise Ai8xError("usage.option", option, message,
                            " ".join((rule.__doc__ or "").split()), exit_code=EXIT_USAGE)


# --------------------------------------------------------------------------- hardware choices
@dataclass(frozen=True)
class HwChoices:
    """What the accelerator does, decided once (`decide_hardware`) from the user's
    options, the model and its mapping; the hardware view (map/hw.py), the mapper's
    streaming checks and the register program read these, never EmitOptions."""

    pipeline: bool  # the accelerator pipeline runs (MAX78002 by default)
    fifo: bool = False  # the input arrives through the FIFOs (standard or fast)
    fast_fifo: bool = False  # ... through the RISC-V core's fast FIFO
    fast_fifo_quad: bool = False  # ... fanned out to the four quadrants (quad-packed)
    fifo_go: bool = False  # processing starts before the first FIFO word (MAX78002)
    zero_sram: bool = False  # cnn_init zeroes the memories with their self-tests
    avg_pool_rounding: bool = False  # average pooling rounds to nearest
    # the snoop units' register values (a full sidecar's global `snoop`); with them the
    # units choose the layer order on the chip
    snoop: tuple[int, ...] | None = None
    mexpress: bool = True  # express kernel loading
    simple1b: bool = False
    one_shot: bool = False  # one layer per cnn_continue()
    powerdown: bool = False


IMPLIED_ZERO_SRAM = ("note[options.zero-sram-implied] --zero-sram implied: the network's "
                     "data buffer must be zero before the first inference, so cnn_init "
                     "zeroes the memories")


def decide_hardware(options: EmitOptions, device: Device, *, first_streams: bool = False,
                    data_buffer: bool = False, pool_rounding: str | None = None,
                    snoop: tuple[int, ...] | None = None, model: str = "model"
                    ) -> tuple[HwChoices, tuple[str, ...]]:
    """The hardware choices and the notes that say what was implied (the one place the
    converter decides them):

    - FIFO input when the user asks for it, or when the mapping streams the first layer
      (seed 000, "Streaming Mode": streaming the first layer requires a FIFO; the vendor
      refuses instead, we imply --fifo);
    - zeroed memories when the network keeps a data buffer (seed 000, Rolling Buffers:
      the buffer must read zeros in the first inference);
    - average pooling rounds when the model says so (`pool_rounding`: the model's
      ai8x.PoolRound mode, the ONNX file is the contract); asking for rounding on a
      model that truncates is refused, as the known answer could not hold;
    - the pipeline where the part has one, unless switched off;
    - the snoop units' values a full sidecar states."""
    notes: tuple[str, ...] = ()
    rounding = options.avg_pool_rounding
    if pool_rounding == "nearest":
        rounding = True
    elif pool_rounding == "truncate" and rounding:
        raise Ai8xError("usage.avg-pool-rounding", model,
                        "--avg-pool-rounding asks the accelerator to round average pooling, "
                        "but the model truncates it (ai8x.PoolRound rounding=truncate)",
                        "drop --avg-pool-rounding, or re-export the model with "
                        "round_avg=True", exit_code=EXIT_USAGE)
    zero_sram = options.zero_sram
    if data_buffer and not zero_sram:
        zero_sram = True
        notes = (IMPLIED_ZERO_SRAM,)
    pipeline = device.support_pipeline if options.pipeline is None \
        else options.pipeline and device.support_pipeline
    choices = HwChoices(
        pipeline=pipeline, fifo=options.uses_fifo or first_streams,
        fast_fifo=options.fast_fifo, fast_fifo_quad=options.fast_fifo_quad,
        fifo_go=options.fifo_go, zero_sram=zero_sram,
        avg_pool_rounding=rounding, snoop=snoop if snoop is not None else options.snoop,
        mexpress=options.mexpress, simple1b=options.simple1b, one_shot=options.one_shot,
        powerdown=options.powerdown)
    return choices, notes


@dataclass(frozen=True)
class HwDecision:
    """The hardware choices of one conversion, decided before mapping: whether the first
    layer streams is the mapping's to decide (each candidate placement the mapper
    examines streams or does not), so both are decided up front and each placement is
    examined, and its hardware view derived, under the one that applies to it."""

    plain: HwChoices  # a placement whose first layer does not stream
    streaming: HwChoices  # one whose first layer streams: FIFO input implied
    notes: tuple[str, ...] = ()  # what the model implied (decide_hardware)

    def of(self, first_streams: bool) -> HwChoices:
        """The choices of a placement whose first layer streams (or not)."""
        return self.streaming if first_streams else self.plain


def decide_conversion(options: EmitOptions, device: Device, *, data_buffer: bool = False,
                      pool_rounding: str | None = None,
                      snoop: tuple[int, ...] | None = None, model: str = "model"
                      ) -> HwDecision:
    """`decide_hardware` for both kinds of placement (see HwDecision); the same
    arguments, all known before mapping."""
    plain, notes = decide_hardware(options, device, data_buffer=data_buffer,
                                   pool_rounding=pool_rounding, snoop=snoop, model=model)
    streaming, _ = decide_hardware(options, device, first_streams=True,
                                   data_buffer=data_buffer, pool_rounding=pool_rounding,
                                   snoop=snoop, model=model)
    return HwDecision(plain=plain, streaming=streaming, notes=notes)


def default_decision(device: Device, *, fifo: bool = False) -> HwDecision:
    """The decision of the default options on `device` (`fifo`: --fifo), for a placement
    examined outside a conversion (a test, a caller of the mapper alone)."""
    return decide_conversion(EmitOptions(fifo=fifo), device)
