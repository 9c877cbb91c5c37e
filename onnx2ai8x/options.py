"""Code-generation options (the vendor tool's spelling, seed 000 "Network Loader" options)."""
from __future__ import annotations

from dataclasses import dataclass

from .devices import MAX78000
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

    @property
    def uses_fifo(self) -> bool:
        return self.fifo or self.fast_fifo

    @classmethod
    def from_cli(cls, **kw: object) -> EmitOptions:
        """Options from the converter's command line (None / unset flags keep defaults);
        an Ai8xError (usage) for a value out of its range (OPTION_RULES)."""
        values = {k: v for k, v in kw.items() if k in cls.__dataclass_fields__ and v is not None}
        # The CLI flag can only switch the new kernel loader on; it is on by default.
        if values.get("new_kernel_loader") is False:
            values.pop("new_kernel_loader")
        options = cls(**values)  # type: ignore[arg-type]
        check_options(options)
        return options

    @classmethod
    def from_vendor_args(cls, args: list[str]) -> EmitOptions:
        """Options from a vendor command line (golden `vendor_args`)."""
        kw: dict[str, object] = {}
        i = 0
        while i < len(args):
            arg = args[i]
            if arg in ("--timer", "--boost", "--max-checklines"):
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
            i += 1
        return cls(**kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- option rules
# One rule per option value the project's C depends on; each docstring is the reason a
# user reads. Both parts have the same timers and GPIO ports (devices.py), so the rules
# take the facts from MAX78000's entry.

def timer_rule(options: EmitOptions) -> str | None:
    """--timer names one of the general-purpose timers TMR0 to TMR3 (the C uses
    MXC_TMR<N>; another number does not compile)."""
    if options.timer is None or 0 <= options.timer < MAX78000.timers:
        return None
    return f"--timer {options.timer}: use a timer from 0 to {MAX78000.timers - 1}"


def boost_rule(options: EmitOptions) -> str | None:
    """--boost names the GPIO pin that switches the CNN boost circuit as PORT.PIN, port
    0 to 3 and pin 0 to 31 (e.g. 2.5 on the evaluation kit)."""
    if options.boost is None:
        return None
    parts = str(options.boost).split(".")
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        port, pin = int(parts[0]), int(parts[1])
        if port < MAX78000.gpio_ports and pin < MAX78000.gpio_pins:
            return None
    return (f"--boost `{options.boost}`: give PORT.PIN with port 0 to "
            f"{MAX78000.gpio_ports - 1} and pin 0 to {MAX78000.gpio_pins - 1}, e.g. 2.5")


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


OPTION_RULES = (timer_rule, boost_rule, max_checklines_rule, fast_fifo_rule)


def check_options(options: EmitOptions) -> None:
    """Every option rule; an Ai8xError (usage) naming the first value out of range."""
    for rule in OPTION_RULES:
        problem = rule(options)
        if problem is not None:
            option, _, message = problem.partition(": ")
            raise Ai8xError("usage.option", option, message,
                            " ".join((rule.__doc__ or "").split()), exit_code=EXIT_USAGE)
