"""ASTRA-sim's LogGP model of a rank's NPU <-> memory bus (`model-shared-bus: 1`).

A rank owns one bus with two ends, NPU and MA (memory accelerator), each a LogGP engine; the NPU
end has a second, inner bus (NPU2 <-> MEM2, same L/o/g, G fixed at 0.0038 ns/byte) that every
request crossing the NPU end goes through first or last. One end sends one request at a time:
sending costs `offset + G*(size-1)` (offset = o, or what is left of the gap g since the end's last
transfer when it sent last), the other end receives it `L + o` later. A receiving end is busy too.
After 8 sends in a row an end yields to its partner if the partner has work. A request that needs
processing waits for the end's single reducer: `(size // 100) * local-reduction-delay + 50` ns.

Requests are small lists `[size, processed, send_back, done, kind]`; `done` is the callback when
the request retires, `kind` what the outer NPU end does when the inner bus hands it back.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

THRESHOLD = 8
INNER_G = 0.0038
FREE, SENDING, RECEIVING = 0, 1, 2
SEND_BACK, PROCESS, RETIRE = 0, 1, 2  # what the outer NPU end does with a request back from the inner bus


class End:
    __slots__ = ("clock", "L", "o", "g", "G", "lrd", "partner", "inner", "sends", "receives",
                 "processing", "busy", "cur", "prev", "last", "subsequent")  # fmt: skip

    def __init__(self, clock: Any, L: int, o: int, g: int, G: float, lrd: int) -> None:
        self.clock = clock
        self.L, self.o, self.g, self.G, self.lrd = L, o, g, G, lrd
        self.partner: End = self
        self.inner: Any = None  # (npu2, mem2) on the outer NPU end
        self.sends: deque = deque()
        self.receives: deque = deque()
        self.processing: deque = deque()
        self.busy = False
        self.cur = self.prev = FREE
        self.last = 0
        self.subsequent = 0

    # -- entry: a request starts at this end --
    def request(self, size: int, processed: bool, send_back: bool, done: Callable[[], None]) -> None:
        req = [size, processed, send_back, done, SEND_BACK]
        if self.inner is not None:
            # the data first comes up from memory over the inner bus
            self.inner[1].request(size, False, False, self._back(req))
            return
        self.sends.append(req)
        if self.cur == FREE:
            if self._yield():
                return
            self._next()

    def _back(self, req: list) -> Callable[[], None]:
        return lambda: self._consider(req)

    def _yield(self) -> bool:
        p = self.partner
        if self.subsequent > THRESHOLD and p.sends and p.subsequent <= THRESHOLD:
            if p.cur == FREE:
                p._general()
            return True
        return False

    def _next(self) -> None:
        now = self.clock.now
        if self.prev == SENDING:
            since = now - self.last
            offset = self.o if self.o + since > self.g else self.g - since
        else:
            offset = self.o
        req = self.sends.popleft()
        p = self.partner
        p.receives.append(req)
        p.prev = p.cur
        p.cur = RECEIVING
        p.clock.at(int(offset + (req[0] - 1) * p.G + p.L + p.o), p._received)
        p.subsequent = 0
        self.cur = SENDING
        self.clock.at(int(offset + self.G * (req[0] - 1)), self._sent)

    def _tail(self) -> None:
        if self.cur == FREE and self.sends:
            if self._yield():
                return
            self._next()

    def _general(self) -> None:
        self._tail()

    def _sent(self, _: Any = None) -> None:
        self.last = self.clock.now
        self.prev = self.cur
        self.cur = FREE
        self.subsequent += 1
        self._tail()

    def _to_inner(self, req: list, kind: int, send_back: bool) -> None:
        req[4] = kind
        self.inner[0].request(req[0], False, send_back, self._back(req))

    def _start_processing(self) -> None:
        self.busy = True
        self.clock.at((self.processing[0][0] // 100) * self.lrd + 50, self._processed)

    def _received(self, _: Any = None) -> None:
        self.last = self.clock.now
        self.prev = self.cur
        req = self.receives.popleft()
        if not self.receives:
            self.cur = FREE
        if req[1]:
            req[1] = False
            if self.inner is not None:
                self._to_inner(req, PROCESS, True)
            else:
                self.processing.append(req)
            if not self.busy and self.processing:
                self._start_processing()
        else:
            self._after_processing(req)
        self._tail()

    def _after_processing(self, req: list) -> None:
        """A request that needs no (more) reduction: send it back, pass it on, or retire it."""
        if req[2]:
            req[2] = False
            if self.inner is not None:
                self._to_inner(req, SEND_BACK, True)
            else:
                self.sends.append(req)
        elif self.inner is not None:
            self._to_inner(req, RETIRE, False)
        else:
            req[3]()

    def _processed(self, _: Any = None) -> None:
        self.busy = False
        req = self.processing.popleft()
        self._after_processing(req)
        if self.processing:
            self._start_processing()
        self._tail()

    def _consider(self, req: list) -> None:
        kind = req[4]
        if kind == RETIRE:
            req[3]()
        elif kind == PROCESS:
            self.processing.append(req)
            if not self.busy:
                self._start_processing()
        else:
            self.sends.append(req)
        self._tail()


class SharedBus:
    """One rank's bus: `to_memory` / `to_npu` start a packet bundle's crossing."""

    __slots__ = ("npu", "ma")

    def __init__(self, clock: Any, L: int, o: int, g: int, G: float, lrd: int) -> None:
        self.npu, self.ma = End(clock, L, o, g, G, lrd), End(clock, L, o, g, G, lrd)
        self.npu.partner, self.ma.partner = self.ma, self.npu
        npu2, mem2 = End(clock, L, o, g, INNER_G, lrd), End(clock, L, o, g, INNER_G, lrd)
        npu2.partner, mem2.partner = mem2, npu2
        self.npu.inner = (npu2, mem2)

    def to_memory(self, size: int, processed: bool, send_back: bool, done: Callable[[], None]) -> None:
        self.npu.request(size, processed, send_back, done)

    def to_npu(self, size: int, processed: bool, send_back: bool, done: Callable[[], None]) -> None:
        self.ma.request(size, processed, send_back, done)


def shared_bus(system: Any) -> tuple[int, int, int, float, int] | None:
    """(L, o, g, G, local-reduction-delay) when the system config turns the shared bus on
    (`model-shared-bus: 1`; ASTRA-sim reads L/o/g as integer ns, G as ns per byte), else None."""
    extra = system.extra
    try:
        on = int(extra.get("model-shared-bus", 0)) == 1
    except (TypeError, ValueError):
        on = False
    if not on:
        return None
    return (
        int(extra.get("L", 0)),
        int(extra.get("o", 0)),
        int(extra.get("g", 0)),
        float(extra.get("G", 0.0)),
        int(extra.get("local-reduction-delay", 1)),
    )
