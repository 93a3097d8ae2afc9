"""PyTorch's CUDA caching allocator with expandable segments, as a model to replay allocations on.

Reserved memory is not the live peak rounded to pages: a block that no free hole fits maps new pages
at the end of its stream's segment, however much is free elsewhere. This model follows the
allocator's documented rules (``c10/cuda/CUDACachingAllocator.cpp`` with
``expandable_segments:True``) closely enough to replay an event trace and land on the same
addresses:

* sizes are rounded up to 512 bytes; a block of 1 MiB or less goes to the stream's *small* pool,
  anything larger to its *large* pool, and each (stream, pool) has one segment of virtual addresses,
  mapped from its start in pages of 2 MiB (small) or 20 MiB (large);
* a request takes the smallest free mapped block of its (stream, pool) that fits (the lowest address
  among equals), the free block at the segment's mapped end only when no other fits (best fit ranks
  it by the size it can grow to, the unmapped space after it included), and the block is split when
  512 bytes or more remain;
* when none fits, pages are mapped at the segment's end, enough that the free block just before the
  unmapped end (if the last block is free) and the new pages hold the request, and the block is
  taken from there;
* a freed block merges with free neighbours; nothing is unmapped during a step (only
  ``empty_cache`` or an out-of-memory retry unmap pages).

The reserved bytes are the pages mapped over every segment; they only grow. ``python -m bench
gpu`` records each run's allocator events (:mod:`memflow.alloc_trace`); :func:`replay` runs them
through this model, and ``python -m bench.bench_gpu --replay`` sets the model's reserved peaks and
addresses beside the measured ones.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

__all__ = ["MIN_BLOCK", "SMALL_SIZE", "SMALL_PAGE", "LARGE_PAGE", "ExpandableAllocator", "replay", "round_size"]

MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 << 20  # kSmallSize: the small pool's largest block
SMALL_PAGE = 2 << 20  # kSmallBuffer
LARGE_PAGE = 20 << 20  # kLargeBuffer


def round_size(n: int) -> int:
    return MIN_BLOCK if n < MIN_BLOCK else -(-n // MIN_BLOCK) * MIN_BLOCK


@dataclass
class _Segment:
    page: int
    starts: list[int] = field(default_factory=list)  # block offsets, ascending
    sizes: dict[int, int] = field(default_factory=dict)
    used: set[int] = field(default_factory=set)  # offsets of allocated blocks
    mapped: int = 0
    used_bytes: int = 0
    # the free blocks as (size, offset), ascending: best fit by bisection (a scan over every block made a
    # deep ResNet's replay of 38,000 allocations take 26 s)
    free_blocks: list[tuple[int, int]] = field(default_factory=list)

    def best_fit(self, size: int) -> int | None:
        """The smallest free block that fits (the lowest offset among equals), the one at the segment's
        mapped end last: the allocator ranks that one by what it can grow to (its size and the unmapped
        space after it)."""
        end = self.starts[-1] if self.starts else None
        fb = self.free_blocks
        i = bisect.bisect_left(fb, (size, -1))
        if i < len(fb) and fb[i][1] == end:
            i += 1
        if i < len(fb):
            return fb[i][1]
        if end is not None and end not in self.used and self.sizes[end] >= size:
            return end
        return None

    def _unlist(self, start: int) -> None:
        fb = self.free_blocks
        del fb[bisect.bisect_left(fb, (self.sizes[start], start))]

    def grow(self, size: int) -> tuple[int, int]:
        """Map pages at the end for ``size``; returns (the free block now holding it, bytes mapped)."""
        last = self.starts[-1] if self.starts else None
        tail = last if last is not None and last not in self.used else None
        have = self.sizes[tail] if tail is not None else 0
        add = -(-(size - have) // self.page) * self.page
        if tail is None:
            tail = self.mapped
            self.starts.append(tail)
        else:
            self._unlist(tail)
        self.sizes[tail] = have + add
        bisect.insort(self.free_blocks, (have + add, tail))
        self.mapped += add
        return tail, add

    def take(self, start: int, size: int) -> None:
        self._unlist(start)
        rest = self.sizes[start] - size
        if rest >= MIN_BLOCK:
            self.sizes[start] = size
            bisect.insort(self.starts, start + size)
            self.sizes[start + size] = rest
            bisect.insort(self.free_blocks, (rest, start + size))
        self.used.add(start)
        self.used_bytes += self.sizes[start]

    def release(self, start: int) -> None:
        self.used.discard(start)
        self.used_bytes -= self.sizes[start]
        i = bisect.bisect_left(self.starts, start)
        if i + 1 < len(self.starts) and self.starts[i + 1] not in self.used:  # merge the next free block
            self._unlist(self.starts[i + 1])
            nxt = self.starts.pop(i + 1)
            self.sizes[start] += self.sizes.pop(nxt)
        if i > 0 and self.starts[i - 1] not in self.used:  # and into the previous one
            prev = self.starts[i - 1]
            self._unlist(prev)
            self.sizes[prev] += self.sizes.pop(start)
            self.starts.pop(i)
            start = prev
        bisect.insort(self.free_blocks, (self.sizes[start], start))


class ExpandableAllocator:
    """The model: ``malloc(size, stream) -> (pool key, offset)``, ``free(key, offset)``; ``reserved`` and
    ``peak_reserved``, ``allocated`` and ``peak_allocated`` in bytes (allocated counts whole blocks)."""

    def __init__(self):
        self.segments: dict[tuple, _Segment] = {}
        self.reserved = self.peak_reserved = self.allocated = self.peak_allocated = 0
        self.maps: list[int] = []  # bytes of each mapping, in order

    def malloc(self, size: int, stream: int = 0) -> tuple[tuple, int]:
        n = round_size(size)
        key = (stream, n <= SMALL_SIZE)
        seg = self.segments.get(key)
        if seg is None:
            seg = self.segments[key] = _Segment(SMALL_PAGE if key[1] else LARGE_PAGE)
        start = seg.best_fit(n)
        if start is None:
            start, add = seg.grow(n)
            self.reserved += add
            self.maps.append(add)
            self.peak_reserved = max(self.peak_reserved, self.reserved)
        seg.take(start, n)
        self.allocated += seg.sizes[start]
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return key, start

    def free_bytes(self, stream: int, small: bool) -> int:
        """The free mapped bytes of a (stream, pool)."""
        seg = self.segments.get((stream, small))
        return seg.mapped - seg.used_bytes if seg else 0

    def free(self, key: tuple, start: int) -> None:
        seg = self.segments[key]
        self.allocated -= seg.sizes[start]
        seg.release(start)


def replay(events: list, timed_from: int = 0) -> dict:
    """Run an allocator trace (``[action, addr, size, stream]`` events, :mod:`memflow.alloc_trace`) through
    the model: its reserved and allocated peaks (over the whole trace, and allocated from ``timed_from``
    on), how many allocations it placed at the trace's own offset in their segment, and the largest
    mapping from ``timed_from`` on (``grew``: the request, the bytes mapped, the free bytes no part of
    which could hold it, and the allocated bytes then)."""
    model = ExpandableAllocator()
    live: dict[int, tuple] = {}
    base: dict[tuple, int] = {}
    same = total = 0
    peak_timed = 0
    grew = None
    for i, (action, addr, size, stream) in enumerate(events):
        if action == "alloc":
            n = len(model.maps)
            held, free = model.allocated, model.free_bytes(stream, round_size(size) <= SMALL_SIZE)
            key, off = model.malloc(size, stream)
            if i >= timed_from and len(model.maps) > n and (grew is None or model.maps[-1] > grew["mapped"]):
                grew = dict(request=size, mapped=model.maps[-1], free=free, allocated=held)
            live[addr] = (key, off)
            base.setdefault(key, addr - off)
            total += 1
            same += addr - base[key] == off
        elif action == "free_completed" and addr in live:
            model.free(*live.pop(addr))
        if i >= timed_from:
            peak_timed = max(peak_timed, model.allocated)
    return dict(peak_reserved=model.peak_reserved, peak_allocated=model.peak_allocated,
                peak_allocated_timed=peak_timed, maps=model.maps, placed_alike=same / total if total else 1.0,
                grew=grew)
