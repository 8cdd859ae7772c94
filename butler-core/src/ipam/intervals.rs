//! The interval core of a pool, in offsets from the pool's first address.
//!
//! Occupied space is two ordered maps of disjoint intervals: allocations and (merged) reserved
//! ranges. Free space is not stored as intervals at all: a free block's bounds follow from its
//! occupied neighbours, so only an index of free blocks by size is kept for best fit. Offsets are
//! `u64` when the pool's CIDR fits (every IPv4 pool, IPv6 /64 and smaller), which halves the
//! memory per allocation; sizes are stored as spans (size - 1) so that a full /64 fits.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

/// An unsigned offset type: `u64` or `u128`.
pub(super) trait Offset: Copy + Ord + Debug {
    const ZERO: Self;
    const MAX: Self;
    fn from_u128(value: u128) -> Self;
    fn to_u128(self) -> u128;
    fn add(self, other: Self) -> Self;
    fn sub(self, other: Self) -> Self;
    fn checked_inc(self) -> Option<Self>;
}

macro_rules! impl_offset {
    ($t:ty) => {
        impl Offset for $t {
            const ZERO: Self = 0;
            const MAX: Self = <$t>::MAX;
            fn from_u128(value: u128) -> Self {
                value as $t
            }
            fn to_u128(self) -> u128 {
                self as u128
            }
            fn add(self, other: Self) -> Self {
                self + other
            }
            fn sub(self, other: Self) -> Self {
                self - other
            }
            fn checked_inc(self) -> Option<Self> {
                self.checked_add(1)
            }
        }
    };
}
impl_offset!(u64);
impl_offset!(u128);

/// Occupied space met by a range, at its lowest address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Conflict {
    /// A reserved address at this offset.
    Reserved { at: u128 },
    /// The allocation `start..=end` at this offset.
    Allocation { start: u128, end: u128, at: u128 },
}

/// Why best fit found nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shortage {
    Exhausted { available: u128 },
    Fragmented { available: u128, largest: u128 },
}

pub(super) struct Intervals<O: Offset> {
    lo: O,
    hi: O,
    reserved: BTreeMap<O, O>,
    allocations: BTreeMap<O, O>,
    /// Free blocks as (span, start): the first entry at or after (span, 0) is the best fit.
    free: BTreeSet<(O, O)>,
    free_total: u128,
    total: u128,
}

impl<O: Offset> Intervals<O> {
    /// The allocatable range `lo..=hi` with `reserved` (any intervals) taken out of it.
    pub(super) fn new(lo: u128, hi: u128, reserved: &[(u128, u128)]) -> Self {
        let mut clipped: Vec<(u128, u128)> = reserved
            .iter()
            .filter(|(s, e)| *s <= hi && *e >= lo)
            .map(|(s, e)| ((*s).max(lo), (*e).min(hi)))
            .collect();
        clipped.sort_unstable();
        let mut merged: BTreeMap<O, O> = BTreeMap::new();
        let mut current: Option<(u128, u128)> = None;
        for (s, e) in clipped {
            current = match current {
                Some((cs, ce)) if s <= ce.saturating_add(1) => Some((cs, ce.max(e))),
                Some((cs, ce)) => {
                    merged.insert(O::from_u128(cs), O::from_u128(ce));
                    Some((s, e))
                }
                None => Some((s, e)),
            };
        }
        if let Some((cs, ce)) = current {
            merged.insert(O::from_u128(cs), O::from_u128(ce));
        }
        let mut this = Intervals {
            lo: O::from_u128(lo),
            hi: O::from_u128(hi),
            reserved: merged,
            allocations: BTreeMap::new(),
            free: BTreeSet::new(),
            free_total: 0,
            total: 0,
        };
        let mut p = Some(this.lo);
        while let Some(at) = p.filter(|at| *at <= this.hi) {
            match this.occupied_at(at) {
                Some((_, end)) => p = end.checked_inc(),
                None => {
                    let (start, end) = this.free_block_at(at);
                    this.add_free(start, end);
                    p = end.checked_inc();
                }
            }
        }
        this.total = this.free_total;
        this
    }

    pub(super) fn total(&self) -> u128 {
        self.total
    }

    pub(super) fn free_total(&self) -> u128 {
        self.free_total
    }

    pub(super) fn free_blocks(&self) -> usize {
        self.free.len()
    }

    pub(super) fn largest_free_block(&self) -> u128 {
        self.free.last().map_or(0, |(span, _)| span.to_u128() + 1)
    }

    pub(super) fn allocation_count(&self) -> usize {
        self.allocations.len()
    }

    pub(super) fn allocations(&self) -> impl Iterator<Item = (u128, u128)> + '_ {
        self.allocations.iter().map(|(s, e)| (s.to_u128(), e.to_u128()))
    }

    /// Best fit: the smallest free block of at least `count` addresses, the lowest on a tie;
    /// the allocation takes its start.
    pub(super) fn allocate(&mut self, count: u128) -> Result<(u128, u128), Shortage> {
        debug_assert!(count >= 1);
        let span = count - 1;
        let best = (span <= O::MAX.to_u128())
            .then(|| self.free.range((O::from_u128(span), O::ZERO)..).next().copied())
            .flatten();
        let Some((block_span, start)) = best else {
            let available = self.free_total;
            return Err(if available < count {
                Shortage::Exhausted { available }
            } else {
                Shortage::Fragmented { available, largest: self.largest_free_block() }
            });
        };
        let end = start.add(O::from_u128(span));
        self.remove_free(start, start.add(block_span));
        if let Some(rest) = end.checked_inc().filter(|r| *r <= start.add(block_span)) {
            self.add_free(rest, start.add(block_span));
        }
        self.allocations.insert(start, end);
        Ok((start.to_u128(), end.to_u128()))
    }

    /// The lowest occupied address of `s..=e`, reserved or allocated; reserved wins a tie.
    pub(super) fn first_conflict(&self, s: u128, e: u128) -> Option<Conflict> {
        let (s, e) = (O::from_u128(s), O::from_u128(e));
        let reserved =
            first_overlap(&self.reserved, s, e).map(|(_, _, at)| Conflict::Reserved { at: at.to_u128() });
        let allocation = first_overlap(&self.allocations, s, e).map(|(start, end, at)| {
            Conflict::Allocation { start: start.to_u128(), end: end.to_u128(), at: at.to_u128() }
        });
        match (reserved, allocation) {
            (Some(Conflict::Reserved { at: r }), Some(Conflict::Allocation { at: a, .. })) if a < r => {
                allocation
            }
            (Some(r), _) => Some(r),
            (None, a) => a,
        }
    }

    /// The first reserved offset inside `s..=e`, if any.
    pub(super) fn first_reserved(&self, s: u128, e: u128) -> Option<u128> {
        first_overlap(&self.reserved, O::from_u128(s), O::from_u128(e)).map(|(_, _, at)| at.to_u128())
    }

    /// The allocation that overlaps `s..=e` first, if any.
    pub(super) fn first_allocation_overlap(&self, s: u128, e: u128) -> Option<(u128, u128, u128)> {
        first_overlap(&self.allocations, O::from_u128(s), O::from_u128(e))
            .map(|(start, end, at)| (start.to_u128(), end.to_u128(), at.to_u128()))
    }

    /// Marks `s..=e` allocated. It must not overlap another allocation; it may cover reserved or
    /// unallocatable space, which stays out of the free index.
    pub(super) fn insert(&mut self, s: u128, e: u128) {
        let (s, e) = (O::from_u128(s), O::from_u128(e));
        debug_assert!(first_overlap(&self.allocations, s, e).is_none());
        let last = e.min(self.hi);
        let mut p = Some(s.max(self.lo));
        while let Some(at) = p.filter(|at| *at <= last) {
            match self.occupied_at(at) {
                Some((_, end)) => p = end.checked_inc(),
                None => {
                    let (start, end) = self.free_block_at(at);
                    self.remove_free(start, end);
                    if start < at {
                        self.add_free(start, at.sub(O::from_u128(1)));
                    }
                    if end > e {
                        self.add_free(e.add(O::from_u128(1)), end);
                    }
                    p = end.checked_inc();
                }
            }
        }
        self.allocations.insert(s, e);
    }

    /// Loads `blocks` (sorted by start, pairwise disjoint) into an index with no allocations yet,
    /// in one sweep instead of one split of the free space per block.
    pub(super) fn load_disjoint(&mut self, blocks: &[(u128, u128)]) {
        debug_assert!(self.allocations.is_empty());
        debug_assert!(blocks.windows(2).all(|w| w[1].0 > w[0].1));
        self.allocations = blocks.iter().map(|(s, e)| (O::from_u128(*s), O::from_u128(*e))).collect();
        // The free blocks are the gaps between occupied intervals (allocations and reserved
        // ranges, both sorted) inside lo..=hi: one merge, no lookups.
        let (lo, hi) = (self.lo.to_u128(), self.hi.to_u128());
        let mut allocated = blocks.iter().copied().peekable();
        let mut reserved = self.reserved.iter().map(|(s, e)| (s.to_u128(), e.to_u128())).peekable();
        let mut free = Vec::new();
        let mut cursor = Some(lo);
        loop {
            let next = match (allocated.peek(), reserved.peek()) {
                (Some(a), Some(r)) if r.0 < a.0 => reserved.next(),
                (Some(_), _) => allocated.next(),
                (None, Some(_)) => reserved.next(),
                (None, None) => None,
            };
            let Some(at) = cursor else { break };
            let Some((s, e)) = next else {
                if at <= hi {
                    free.push((at, hi));
                }
                break;
            };
            if s > at && at <= hi {
                free.push((at, (s - 1).min(hi)));
            }
            if e >= at {
                cursor = e.checked_add(1);
            }
        }
        self.free_total = free.iter().map(|(s, e)| e - s + 1).sum();
        let mut index: Vec<(O, O)> =
            free.into_iter().map(|(s, e)| (O::from_u128(e - s), O::from_u128(s))).collect();
        index.sort_unstable();
        self.free = index.into_iter().collect();
    }

    /// Frees the allocation that is exactly `s..=e`; false when there is none.
    pub(super) fn release(&mut self, s: u128, e: u128) -> bool {
        let (s, e) = (O::from_u128(s), O::from_u128(e));
        if self.allocations.get(&s) != Some(&e) {
            return false;
        }
        self.allocations.remove(&s);
        let last = e.min(self.hi);
        let mut p = Some(s.max(self.lo));
        while let Some(at) = p.filter(|at| *at <= last) {
            if let Some((_, end)) = self.occupied_at(at) {
                p = end.checked_inc();
                continue;
            }
            // The block around `at` now runs from the free neighbour on the left, through the
            // released piece, to the free neighbour on the right; both neighbours merge into it.
            let (start, end) = self.free_block_at(at);
            let piece_end = end.min(last);
            if start < at {
                self.remove_free(start, at.sub(O::from_u128(1)));
            }
            if end > piece_end {
                self.remove_free(piece_end.add(O::from_u128(1)), end);
            }
            self.add_free(start, end);
            p = piece_end.checked_inc();
        }
        true
    }

    /// The allocation or reserved range that holds `at`, if any.
    fn occupied_at(&self, at: O) -> Option<(O, O)> {
        let holds = |map: &BTreeMap<O, O>| {
            map.range(..=at).next_back().filter(|(_, e)| **e >= at).map(|(s, e)| (*s, *e))
        };
        holds(&self.allocations).or_else(|| holds(&self.reserved))
    }

    /// The free block that holds the free address `at`: from the end of the occupied space on its
    /// left to the start of the occupied space on its right, within the allocatable range.
    fn free_block_at(&self, at: O) -> (O, O) {
        let one = O::from_u128(1);
        let left = |map: &BTreeMap<O, O>| map.range(..=at).next_back().map(|(_, e)| e.add(one));
        let right = |map: &BTreeMap<O, O>| map.range(at..).next().map(|(s, _)| s.sub(one));
        let start =
            [Some(self.lo), left(&self.allocations), left(&self.reserved)].into_iter().flatten().max();
        let end =
            [Some(self.hi), right(&self.allocations), right(&self.reserved)].into_iter().flatten().min();
        (start.unwrap_or(self.lo), end.unwrap_or(self.hi))
    }

    fn add_free(&mut self, start: O, end: O) {
        let span = end.sub(start);
        self.free.insert((span, start));
        self.free_total += span.to_u128() + 1;
    }

    fn remove_free(&mut self, start: O, end: O) {
        let span = end.sub(start);
        let removed = self.free.remove(&(span, start));
        debug_assert!(removed, "free block {start:?}..={end:?} was not indexed");
        self.free_total -= span.to_u128() + 1;
    }
}

/// The interval of `map` that overlaps `s..=e` at the lowest address, with that address.
fn first_overlap<O: Offset>(map: &BTreeMap<O, O>, s: O, e: O) -> Option<(O, O, O)> {
    if let Some((start, end)) = map.range(..=s).next_back()
        && *end >= s
    {
        return Some((*start, *end, s));
    }
    map.range(s..=e).next().map(|(start, end)| (*start, *end, *start))
}
