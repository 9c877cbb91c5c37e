"""Code-generation options (the vendor tool's spelling, seed 000 "Network Loader" options)."""
from __future__ import annotations

from dataclasses import dataclass


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

    @property
    def uses_fifo(self) -> bool:
        return self.fifo or self.fast_fifo

    @classmethod
    def from_cli(cls, **kw: object) -> EmitOptions:
        """Options from the converter's command line (None / unset flags keep defaults)."""
        values = {k: v for k, v in kw.items() if k in cls.__dataclass_fields__ and v is not None}
        # The CLI flag can only switch the new kernel loader on; it is on by default.
        if values.get("new_kernel_loader") is False:
            values.pop("new_kernel_loader")
        return cls(**values)  # type: ignore[arg-type]

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
