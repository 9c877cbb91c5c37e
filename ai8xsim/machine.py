"""The accelerator's memories and registers, and the effect of one APB access.

State: the register file (absolute address -> value), 16 data memories (one per four
processors, a byte lane per processor), 64 kernel memories (72-bit words, 9 bytes each)
and 4 bias memories. Writes land where the memory map says; a write that sets quadrant
0's enable bit starts the accelerator (`ai8xsim.sequencer.run`), which reads and writes
only these memories.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .device import APB_BASE, Device

CTL_CNN_EN = 1 << 0
CTL_MEXPRESS = 1 << 20
FIFO_DATA = APB_BASE + 8  # CNN_FIFO_WR0..3: the FIFOs' data registers
FAST_FIFO = -1  # `Machine.fifos` key of the words written to the fast FIFO


class SimError(Exception):
    """The project does something the functional model cannot execute."""


class NotModelled(SimError):
    """The project uses a hardware feature the functional model does not execute.

    Distinct from other errors: the model can then vouch for neither PASS nor FAIL, and
    `verify` says so with its own verdict (and exit code) instead of a misleading one.
    """


@dataclass
class Machine:
    dev: Device
    regs: dict[int, int] = field(default_factory=dict)
    sram: np.ndarray = field(init=False)
    mram: np.ndarray = field(init=False)
    bram: np.ndarray = field(init=False)
    runs: int = 0
    # express kernel loader: (processor, next byte position in its kernel memory); a byte
    # store with address bit 0 set loads it, word stores then fill bytes from it
    _express: tuple[int, int] | None = None
    written_outside: list[int] = field(default_factory=list)
    fifos: dict[int, list[int]] = field(default_factory=dict)  # FIFO k: words written

    def __post_init__(self):
        self.sram = np.zeros((16, self.dev.sram_spacing, 4), dtype=np.uint8)
        self.mram = np.zeros((64, self.dev.mask_offs, 9), dtype=np.uint8)
        self.bram = np.zeros((4, self.dev.bias_bytes), dtype=np.uint8)

    # ---- data memory, word access
    def sram_word(self, memory: int, word: int) -> int:
        return int(self.sram[memory, word].view("<u4")[0])

    def read_words(self, address: int, count: int) -> list[int]:
        """`count` consecutive words from `address` (data memory or registers)."""
        loc = self.dev.sram_locate(address)
        end = self.dev.sram_locate(address + 4 * (count - 1)) if count else loc
        if loc is not None and end is not None and end[0] == loc[0]:
            return self.sram[loc[0], loc[1]:loc[1] + count].reshape(-1).view("<u4").tolist()
        return [self.read(address + 4 * k) for k in range(count)]

    def read(self, address: int) -> int:
        loc = self.dev.sram_locate(address)
        if loc is not None:
            return self.sram_word(*loc)
        return self.regs.get(address, 0)

    def write(self, address: int, value: int, op: str = "=", width: int = 32) -> bool:
        """Apply one store; True when it started the accelerator."""
        value &= 0xFFFFFFFF
        if width == 8:
            return self._write_byte(address, value & 0xFF)
        loc = self.dev.sram_locate(address)
        if loc is not None:
            old = self.sram_word(*loc)
            new = _combine(old, value, op)
            self.sram[loc[0], loc[1]] = np.frombuffer(new.to_bytes(4, "little"), np.uint8)
            return False
        kloc = self.dev.mram_locate(address)
        if kloc is not None:
            self._write_kernel(kloc[0], kloc[1], value)
            return False
        bloc = self.dev.bram_locate(address)
        if bloc is not None:
            self.bram[bloc] = _combine(int(self.bram[bloc]), value, op) & 0xFF
            return False
        if FIFO_DATA <= address < FIFO_DATA + 16:
            self.fifos.setdefault((address - FIFO_DATA) // 4, []).append(value)
            return False
        if address == self.dev.fast_fifo_data:
            self.fifos.setdefault(FAST_FIFO, []).append(value & 0xFFFFFFFF)
            return False
        if not APB_BASE <= address < APB_BASE + 0x10000000:
            self.written_outside.append(address)
            return False
        old = self.regs.get(address, 0)
        new = _combine(old, value, op)
        self.regs[address] = new
        self._self_test(address, new)
        ctl0 = self.dev.ctl(0, self.dev.reg_ctl)
        return address == ctl0 and bool(new & CTL_CNN_EN) and not old & CTL_CNN_EN

    def _self_test(self, address: int, value: int) -> None:
        """A quadrant's SRAM test register starting a built-in self-test: the test
        leaves its memory zeroed (the data memory instances, the kernel memory of the
        quadrant's processors, its bias memory), which --zero-sram relies on: a data
        buffer reads zeros in the first inference whatever the memory held before."""
        dev = self.dev
        for g in range(4):
            if address != dev.ctl(g, dev.reg_sram_test):
                continue
            if value & dev.bist_data_bit:
                per = self.sram.shape[0] // 4
                self.sram[g * per:(g + 1) * per] = 0
            if value & dev.bist_mask_bit:
                per = self.mram.shape[0] // 4
                self.mram[g * per:(g + 1) * per] = 0
            if value & dev.bist_bias_bit:
                self.bram[g] = 0

    def feed(self, address: int, words) -> None:
        """Words written one after the other to one address (a FIFO, or a register)."""
        if FIFO_DATA <= address < FIFO_DATA + 16 or address == self.dev.fast_fifo_data:
            key = FAST_FIFO if address == self.dev.fast_fifo_data \
                else (address - FIFO_DATA) // 4
            self.fifos.setdefault(key, []).extend(int(w) & 0xFFFFFFFF for w in words)
            return
        for w in words:
            self.write(address, int(w))

    def load(self, address: int, words, express: bool = False) -> None:
        """Consecutive word stores from `address` (a memcpy, or one kernel-loader run)."""
        if express:
            self._write_byte(address | 1, 1)
        data = np.asarray(words, dtype=np.uint32)
        loc = self.dev.sram_locate(address)
        end = self.dev.sram_locate(address + 4 * (len(data) - 1)) if len(data) else loc
        if loc is not None and end is not None and end[0] == loc[0]:
            self.sram[loc[0], loc[1]:loc[1] + len(data)] = \
                data.astype("<u4").view(np.uint8).reshape(-1, 4)
            return
        kloc = self.dev.mram_locate(address)
        if kloc is not None and len(data) and self._express_mode(kloc[0]):
            # One express run: all its bytes go on from the address counter at once.
            p, pos = self._express_position(kloc[0], kloc[1])
            flat = self.mram[p].reshape(-1)
            raw = data.astype(">u4").view(np.uint8)
            n = min(len(raw), flat.size - pos)
            if n > 0:
                flat[pos:pos + n] = raw[:n]
            self._express = (p, pos + len(raw))
            return
        for k, w in enumerate(data.tolist()):
            self.write(address + 4 * k, w)

    def _write_byte(self, address: int, value: int) -> bool:
        kloc = self.dev.mram_locate(address)
        if kloc is not None and address & 1 and self._express_mode(kloc[0]):
            # "Set address": a byte store with bit 0 set loads the express loader's
            # address counter (one 72-bit kernel per 4 bytes of address); the word stores
            # that follow fill bytes from there whatever their own address in the window:
            # the vendor's older loader stores to the window's start after setting the
            # address of the first used kernel (its izer/kernels.py, embedded mexpress).
            self._express = (kloc[0], (kloc[1] // 4) * 9)
        return False

    def _express_mode(self, proc: int) -> bool:
        return bool(self.regs.get(self.dev.ctl(proc // 16, self.dev.reg_ctl), 0)
                    & CTL_MEXPRESS)

    def _express_position(self, proc: int, offset: int) -> tuple[int, int]:
        """Where an express word store to `proc` goes: the counter, when it was set for
        this processor; else the store's own address (packed: a kernel per 4 bytes)."""
        if self._express is not None and self._express[0] == proc:
            return self._express
        return proc, (offset // 4) * 9

    def _write_kernel(self, proc: int, offset: int, value: int) -> None:
        if self._express_mode(proc):
            # Packed mode: bytes follow kernel after kernel from the address counter.
            p, pos = self._express_position(proc, offset)
            data = value.to_bytes(4, "big")
            flat = self.mram[p].reshape(-1)
            for b in data:
                if pos < flat.size:
                    flat[pos] = b
                pos += 1
            self._express = (p, pos)
            return
        slot, word = divmod(offset, 16)
        word //= 4
        if slot >= self.dev.mask_offs:
            return
        data = value.to_bytes(4, "big")
        if word == 0:
            self.mram[proc, slot, 0] = value & 0xFF
        elif word == 1:
            self.mram[proc, slot, 1:5] = np.frombuffer(data, np.uint8)
        elif word == 2:
            self.mram[proc, slot, 5:9] = np.frombuffer(data, np.uint8)

    # ---- registers
    def lreg(self, group: int, reg: int | None, layer: int) -> int:
        if reg is None:
            return 0
        return self.regs.get(self.dev.lreg(group, reg, layer), 0)

    def ctl(self, group: int, reg: int) -> int:
        return self.regs.get(self.dev.ctl(group, reg), 0)


def _combine(old: int, value: int, op: str) -> int:
    if op == "|=":
        return old | value
    if op == "&=":
        return old & value
    return value
