"""The iteration order of a C++ `std::unordered_set<uint64_t>` (GCC's libstdc++), for replaying
ASTRA-sim where it walks one.

ASTRA-sim's custom collectives issue the nodes of their dependency-free set in that set's own
order, and the set is filled as the feeder's dependency maps (also unordered) are walked: which
of two sends takes a shared link first depends on it. libstdc++'s table is a singly linked list
with buckets pointing at the node *before* their first element; identity hash, bucket = key mod
a prime; a new key goes to the front of its bucket's run, or to the front of the whole list when
its bucket is empty; growth (when the count would pass the bucket count) re-links every node,
front-inserting each into the new buckets, which reverses runs. The primes are libstdc++'s own
table (`_Prime_rehash_policy::_M_next_bkt`, read from the library); past it, doubling primes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator

_PRIMES = (
    2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 103, 109,
    113, 127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313, 337, 359, 383, 409, 439,
    467, 503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109, 1193, 1289, 1381, 1493, 1613, 1741, 1879,
    2029, 2179, 2357, 2549, 2753, 2971, 3209, 3469, 3739, 4027, 4349, 4703, 5087, 5503, 5953, 6427, 6949, 7517,
    8123, 8783, 9497, 10273, 11113, 12011, 12983, 14033, 15173, 16411, 17749, 19183, 20753, 22447, 24281, 26267,
    28411, 30727, 33223, 35933, 38873, 42043, 45481, 49201, 53201, 57557, 62233, 67307, 72817, 78779, 85229,
    92203, 99733, 107897, 116731, 126271, 136607, 147793, 159871, 172933, 187091, 202409, 218971, 236897,
    256279, 277261, 299951, 324503, 351061, 379787, 410857, 444487, 480881, 520241, 562841, 608903, 658753,
    712697, 771049, 834181, 902483, 976369, 1056323, 1142821, 1236397, 1337629, 1447153, 1565659, 1693859,
    1832561, 1982627, 2144977, 2320627, 2510653, 2716249, 2938679, 3179303, 3439651, 3721303, 4026031, 4355707,
    4712381, 5098259, 5515729, 5967347, 6456007, 6984629, 7556579, 8175383, 8844859, 9569143, 10352717,
    11200489, 12117689, 13109983, 14183539, 15345007, 16601593, 17961079, 19431899, 21023161, 22744717,
    24607243, 26622317, 28802401, 31160981, 33712729, 36473443, 39460231, 42691603, 46187573, 49969847,
    54061849, 58488943, 63278561, 68460391, 74066549, 80131819, 86693767, 93793069, 101473717, 109783337,
    118773397, 128499677, 139022417, 150406843, 162723577, 176048909, 190465427, 206062531, 222936881,
    241193053, 260944219, 282312799, 305431229, 330442829, 357502601, 386778277, 418451333, 452718089,
    489790921, 529899637, 573292817, 620239453, 671030513, 725980837, 785430967, 849749479, 919334987,
    994618837, 1076067617, 1164186217, 1259520799, 1362662261, 1474249943, 1594975441, 1725587117,
)  # fmt: skip
_FAST = (2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13)


def _next_bkt(n: int) -> tuple[int, int]:
    """(bucket count, next resize) as `_M_next_bkt(n)` with max load factor 1."""
    if n < len(_FAST):
        if n == 0:
            return 1, 0
        return _FAST[n], _FAST[n]
    i = bisect_left(_PRIMES, n, lo=5)
    p = _PRIMES[i] if i < len(_PRIMES) else n | 1
    return p, p


class StdHashSet:
    """Insert, erase and iterate like libstdc++'s unordered_set of integers (identity hash)."""

    __slots__ = ("nxt", "head", "buckets", "n", "count", "next_resize")

    def __init__(self, keys: Iterable[int] = ()) -> None:
        self.nxt: dict[int, int] = {}  # key -> next key (-1: end); -2 stands for "before begin"
        self.head = -1
        self.buckets: dict[int, int] = {}  # bucket -> the key before its first node (-2: before begin)
        self.n = 1
        self.count = 0
        self.next_resize = 0
        for k in keys:
            self.insert(k)

    def __len__(self) -> int:
        return self.count

    def __contains__(self, key: int) -> bool:
        return key in self.nxt

    def __iter__(self) -> Iterator[int]:
        k = self.head
        nxt = self.nxt
        while k != -1:
            yield k
            k = nxt[k]

    def _after(self, before: int) -> int:
        return self.head if before == -2 else self.nxt[before]

    def _set_after(self, before: int, key: int) -> None:
        if before == -2:
            self.head = key
        else:
            self.nxt[before] = key

    def _need_rehash(self) -> int:
        if self.count + 1 > self.next_resize:
            min_bkts = max(self.count + 1, 0 if self.next_resize else 11)
            if min_bkts >= self.n:
                n, self.next_resize = _next_bkt(max(min_bkts + 1, self.n * 2))
                return n
            self.next_resize = self.n
        return 0

    def _rehash(self, n: int) -> None:
        keys = list(self)
        self.buckets = {}
        self.head = -1
        self.n = n
        begin_bkt = 0
        for k in keys:
            b = k % n
            before = self.buckets.get(b)
            if before is None:
                self.nxt[k] = self.head
                self.head = k
                self.buckets[b] = -2
                if self.nxt[k] != -1:
                    self.buckets[begin_bkt] = k
                begin_bkt = b
            else:
                self.nxt[k] = self._after(before)
                self._set_after(before, k)

    def insert(self, key: int) -> None:
        if key in self.nxt:
            return
        n = self._need_rehash()
        if n:
            self._rehash(n)
        b = key % self.n
        before = self.buckets.get(b)
        if before is not None:
            self.nxt[key] = self._after(before)
            self._set_after(before, key)
        else:
            self.nxt[key] = self.head
            self.head = key
            if self.nxt[key] != -1:
                self.buckets[self.nxt[key] % self.n] = key
            self.buckets[b] = -2
        self.count += 1

    def erase(self, key: int) -> None:
        if key not in self.nxt:
            return
        n = self.n
        b = key % n
        before = self.buckets[b]
        prev = before
        while self._after(prev) != key:
            prev = self._after(prev)
        nxt = self.nxt.pop(key)
        if prev == before:  # key was the first of its bucket
            if nxt == -1 or nxt % n != b:
                if nxt != -1:
                    self.buckets[nxt % n] = before
                del self.buckets[b]
        elif nxt != -1 and nxt % n != b:
            self.buckets[nxt % n] = prev
        self._set_after(prev, nxt)
        self.count -= 1
