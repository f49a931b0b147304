"""Point-to-point messages as ASTRA-sim's analytical front end delivers them: the send/recv matcher.

A message goes out with `send` and is taken with `recv`; the k-th send and the k-th receive of one
key meet (ASTRA-sim's key is tag, source, destination and size). When the data arrives, the
sender's callback runs first, then the receiver's if it has posted; a receive posted after its data
arrived completes at once (a 0-delay event). Send callbacks fire on *arrival*, not when
serialization ends.

With the rendezvous protocol (ASTRA-sim's `--rendezvous-protocol=true`) every message is preceded
by an 8,192-byte handshake from the receiver back to the sender: the sender waits for it before
injecting, and the receiver posts its real receive when its handshake has been delivered.

Both collectives (one key per chunk and pair) and the trace's own COMM_SEND/RECV nodes use it, on
one clock and one set of links, so they queue behind each other on the congestion-aware backend.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from chakra.sim.network import Network

RENDEZVOUS_BYTES = 8192


def transmit(
    clock: Any, net: Network, links: Any, src: int, dst: int, size: int, done: Callable[[Any], None], arg: Any
) -> None:
    """Send `size` bytes src -> dst from the clock's now; `done(arg)` runs on arrival.

    Unaware: one closed-form delay. Aware: hop by hop, store-and-forward, as ASTRA-sim's links: a
    free link starts the message at once, booking its arrival at the next device and, after the
    serialization, an event that frees the link and starts the next waiting message (FIFO);
    `links` holds `free` (link -> when it is free) and `pending` (link -> waiting messages, present
    while the link is busy).
    """
    if not net.aware:
        clock.at(net.p2p_time(src, dst, size), done, arg)
        return
    route = net.route(src, dst)
    if not route:
        clock.at(0, done, arg)
        return
    _hop((clock, net, links, route, 0, size, done, arg))


def _hop(state: tuple) -> None:
    """One link of a message's route (a plain function over a tuple: no closure cycles, which
    would outlive the run while simulate() keeps the cyclic garbage collector off)."""
    clock, net, links, route, i, size, done, arg = state
    if i == len(route):
        done(arg)
        return
    waiting = links.pending.get(route[i])
    if waiting is not None:
        waiting.append(state)
    else:
        _transmit_on(state, deque())


def _transmit_on(state: tuple, waiting: deque) -> None:
    clock, net, links, route, i, size, done, arg = state
    link = route[i]
    links.pending[link] = waiting
    busy, deliver = net.link_times(link[0], size)
    links.free[link] = clock.now + busy
    if links.traffic is not None:
        links.traffic.link(link, clock.now, busy, size, arg[0])
    clock.at(deliver, _hop, (clock, net, links, route, i + 1, size, done, arg))
    clock.at(busy, _link_freed, (links, link))


def _link_freed(state: tuple) -> None:
    links, link = state
    waiting = links.pending[link]
    if waiting:
        _transmit_on(waiting.popleft(), waiting)
    else:
        del links.pending[link]


class Messenger:
    """Matches sends with receives on one clock and one network (see module doc)."""

    __slots__ = ("clock", "net", "rendezvous", "free", "pending", "sent", "posted", "mismatched", "traffic")

    def __init__(self, clock: Any, net: Network, rendezvous: bool = False) -> None:
        self.clock = clock
        self.net = net
        self.rendezvous = rendezvous
        self.free: dict[tuple, int] = {}  # aware links: the time each becomes free
        self.pending: dict[tuple, deque] = {}  # aware links now busy: the messages waiting for each
        self.sent: dict[Any, deque] = {}  # key -> sizes of arrived messages nobody received yet
        self.posted: dict[Any, deque] = {}  # key -> (size, callback) of receives waiting
        self.mismatched: list[tuple] = []  # keys whose send and receive sizes differ
        self.traffic: Any = None  # a chakra.sim.traffic.TrafficRecorder, when asked for

    def send(self, src: int, dst: int, size: int, key: Any, on_sent: Callable[[], None]) -> None:
        if not self.rendezvous:
            self._send(src, dst, size, key, on_sent)
            return
        self._recv(dst, RENDEZVOUS_BYTES, ("rv", key), lambda: self._send(src, dst, size, key, on_sent))

    def recv(self, src: int, dst: int, size: int, key: Any, on_recv: Callable[[], None]) -> None:
        if not self.rendezvous:
            self._recv(src, size, key, on_recv)
            return
        self._send(dst, src, RENDEZVOUS_BYTES, ("rv", key), lambda: self._recv(src, size, key, on_recv))

    # -- without the handshake --
    def _send(self, src: int, dst: int, size: int, key: Any, on_sent: Callable[[], None]) -> None:
        if self.traffic is not None:
            self.traffic.message(self.clock.now, src, dst, size, key)
        transmit(self.clock, self.net, self, src, dst, size, self._arrive, (key, size, on_sent))

    def _arrive(self, arg: tuple) -> None:
        key, size, on_sent = arg
        on_sent()
        waiting = self.posted.get(key)
        if waiting:
            want, fn = waiting.popleft()
            if not waiting:
                del self.posted[key]  # keys are per message: keep the dicts small
            if want != size:
                self.mismatched.append(key)
            fn()
        else:
            self.sent.setdefault(key, deque()).append(size)

    def _recv(self, src: int, size: int, key: Any, on_recv: Callable[[], None]) -> None:
        done = self.sent.get(key)
        if done:
            got = done.popleft()
            if not done:
                del self.sent[key]
            if got != size:
                self.mismatched.append(key)
            self.clock.at(0, _call, on_recv)
        else:
            self.posted.setdefault(key, deque()).append((size, on_recv))


def _call(fn: Callable[[], None]) -> None:
    fn()


def _noop() -> None:
    pass


NOOP = _noop
