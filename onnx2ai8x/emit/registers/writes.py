"""Register writes as values, and the weight-memory facts the registers point at."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...map.weights import WeightMemory


@dataclass(frozen=True)
class Write:
    """`*((volatile uint32_t *) address) <op> value;` in the generated C."""

    address: int
    value: int
    # "=", "|=" or "&=" store; "wait" spins until (register & mask) == value; "check"
    # returns CNN_FAIL unless (register & mask) == value (the BIST status, --zero-sram)
    op: str = "="
    comment: str = ""
    mask: int = 0

    def c(self) -> str:
        reg = f"*((volatile uint32_t *) 0x{self.address:08x})"
        if self.op == "wait":
            text = f"while (({reg} & 0x{self.mask:x}) != 0x{self.value:x});"
        elif self.op == "check":
            text = (f"if (({reg} & 0x{self.mask:08x}) != 0x{self.value:08x}) "
                    "return CNN_FAIL;")
        else:
            text = f"{reg} {self.op} 0x{self.value:08x};"
        return text + (f" // {self.comment}" if self.comment else "")


@dataclass
class WriteList:
    """Collects the writes of one C function (local to one emission run).

    A register whose value is zero is left alone unless forced: the accelerator's
    registers reset to zero, so the vendor tool (and we) skip those writes.
    """

    writes: list[Write] = field(default_factory=list)

    def put(self, address: int, value: int, comment: str = "", *, force: bool = False) -> None:
        if value != 0 or force:
            self.writes.append(Write(address, value & 0xFFFFFFFF, "=", comment))

    def modify(self, address: int, value: int, op: str, comment: str = "") -> None:
        self.writes.append(Write(address, value & 0xFFFFFFFF, op, comment))

    def wait(self, address: int, mask: int, value: int, comment: str = "") -> None:
        self.writes.append(Write(address, value, "wait", comment, mask))

    def check(self, address: int, mask: int, value: int, comment: str = "") -> None:
        self.writes.append(Write(address, value, "check", comment, mask))

    def done(self) -> tuple[Write, ...]:
        return tuple(self.writes)


BIAS_ALL_GROUPS = -1


@dataclass(frozen=True)
class WeightMemoryMap:
    """Per layer, where its kernels and bias live (from kernel and bias allocation).

    `kernel_offset`: first kernel-memory column (in 9-byte kernel units) of the layer;
    `kernel_count`: kernels per processor; `kernel_out_channels`: output channels the
    mask counter walks; `bias_offsets[layer][group]`: byte offset in that quadrant's bias
    memory or None; `bias_group[layer]`: the quadrant holding the bias (None: no bias,
    BIAS_ALL_GROUPS: a depthwise layer with bias in every quadrant it uses).
    """

    kernel_offset: tuple[int, ...]
    kernel_count: tuple[int, ...]
    kernel_out_channels: tuple[int, ...]
    bias_offsets: tuple[tuple[int | None, ...], ...]
    bias_group: tuple[int | None, ...]

    @classmethod
    def of(cls, weights: WeightMemory) -> WeightMemoryMap:
        """The map of a kernel and bias allocation (map/weights.py)."""
        kernels, bias = weights.kernels, weights.bias
        return cls(kernel_offset=kernels.offset, kernel_count=kernels.count,
                   kernel_out_channels=kernels.out_channels, bias_offsets=bias.offsets,
                   bias_group=bias.group)
