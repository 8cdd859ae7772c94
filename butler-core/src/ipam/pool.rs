//! [`Pool`] and [`PoolSpec`]: the public face of the allocator, in addresses.

use std::net::IpAddr;

use ipnet::IpNet;

use super::addr::{Family, from_u128, to_u128};
use super::allocation::Allocation;
use super::error::IpamError;
use super::intervals::{Conflict, Intervals, Shortage};

/// What a pool is made of: its CIDR, an optional allocatable range inside it (the whole CIDR when
/// unset) and reserved ranges that are never allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    cidr: IpNet,
    allocatable: Option<(IpAddr, IpAddr)>,
    reserved: Vec<IpNet>,
}

impl PoolSpec {
    /// A pool over the whole of `cidr` (host bits are ignored: `10.40.0.5/21` is `10.40.0.0/21`).
    pub fn new(cidr: IpNet) -> PoolSpec {
        PoolSpec { cidr: cidr.trunc(), allocatable: None, reserved: Vec::new() }
    }

    /// Restricts allocations to `start..=end`, which must lie inside the CIDR.
    pub fn with_allocatable(mut self, start: IpAddr, end: IpAddr) -> PoolSpec {
        self.allocatable = Some((start, end));
        self
    }

    /// Excludes `cidr` from allocation. Reservations may overlap; only the part inside the
    /// allocatable range counts.
    pub fn with_reserved(mut self, cidr: IpNet) -> PoolSpec {
        self.reserved.push(cidr.trunc());
        self
    }
}

/// Figures of a pool, exact for IPv6 too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Allocatable addresses: the allocatable range minus the reserved addresses inside it.
    pub total: u128,
    /// Allocatable addresses that allocations hold (`total - available`).
    pub allocated: u128,
    /// Free addresses.
    pub available: u128,
    /// Number of allocations.
    pub allocations: usize,
    /// Size of the largest free block: the largest request that can succeed now.
    pub largest_free_block: u128,
    /// Number of free blocks.
    pub free_blocks: usize,
    /// `100 - floor(largest_free_block * 100 / available)`, 0 with at most one free block.
    pub fragmentation_percent: u8,
}

/// The two widths of the interval core: `u64` offsets when the CIDR fits, else `u128`.
enum Core {
    Narrow(Intervals<u64>),
    Wide(Intervals<u128>),
}

macro_rules! core {
    ($self:expr, $c:ident => $body:expr) => {
        match $self {
            Core::Narrow($c) => $body,
            Core::Wide($c) => $body,
        }
    };
}

/// An address pool: allocations, reserved ranges and free space, kept as intervals.
pub struct Pool {
    spec: PoolSpec,
    family: Family,
    /// First address of the CIDR; the core works in offsets from it.
    base: u128,
    /// Allocatable range, as offsets.
    lo: u128,
    hi: u128,
    core: Core,
}

impl Pool {
    /// Builds a pool, refusing mixed families, an allocatable range outside the CIDR or backwards,
    /// and the IPv6 `::/0` (whose size does not fit 128 bits).
    pub fn new(spec: PoolSpec) -> Result<Pool, IpamError> {
        let cidr = spec.cidr;
        let family = Family::of(cidr.addr());
        let host_bits = family.bits() - u32::from(cidr.prefix_len());
        if host_bits == 128 {
            return Err(IpamError::PoolTooLarge { cidr });
        }
        let base = to_u128(cidr.network());
        let domain_max = (1u128 << host_bits) - 1;
        let family_check = |what: String, addr: IpAddr| {
            if Family::of(addr) == family {
                Ok(())
            } else {
                Err(IpamError::FamilyMismatch { what, found: Family::of(addr), expected: family, cidr })
            }
        };
        let (lo, hi) = match spec.allocatable {
            None => (0, domain_max),
            Some((start, end)) => {
                family_check(format!("allocatable start {start}"), start)?;
                family_check(format!("allocatable end {end}"), end)?;
                if to_u128(start) > to_u128(end) {
                    return Err(IpamError::StartAfterEnd { start, end });
                }
                if !cidr.contains(&start) || !cidr.contains(&end) {
                    return Err(IpamError::AllocatableOutsideCidr { start, end, cidr });
                }
                (to_u128(start) - base, to_u128(end) - base)
            }
        };
        let mut reserved = Vec::with_capacity(spec.reserved.len());
        for net in &spec.reserved {
            family_check(format!("reserved range {net}"), net.addr())?;
            let (s, e) = (to_u128(net.network()), to_u128(net.broadcast()));
            // Only the part inside the CIDR can matter; the core clips it to the allocatable range.
            if e >= base && s <= base + domain_max {
                reserved.push((s.max(base) - base, e.min(base + domain_max) - base));
            }
        }
        let core = if domain_max <= u64::MAX as u128 {
            Core::Narrow(Intervals::new(lo, hi, &reserved))
        } else {
            Core::Wide(Intervals::new(lo, hi, &reserved))
        };
        Ok(Pool { spec, family, base, lo, hi, core })
    }

    /// The pool's CIDR.
    pub fn cidr(&self) -> IpNet {
        self.spec.cidr
    }

    /// The pool's address family.
    pub fn family(&self) -> Family {
        self.family
    }

    /// First and last allocatable address.
    pub fn allocatable(&self) -> (IpAddr, IpAddr) {
        (self.addr(self.lo), self.addr(self.hi))
    }

    /// Best fit: the smallest free block that holds `count` addresses, the lowest on a tie, from
    /// its start.
    pub fn allocate(&mut self, count: u128) -> Result<Allocation, IpamError> {
        if count < 1 {
            return Err(IpamError::CountBelowOne { count });
        }
        match core!(&mut self.core, c => c.allocate(count)) {
            Ok((s, e)) => Ok(self.allocation(s, e)),
            Err(Shortage::Exhausted { available }) => {
                Err(IpamError::Exhausted { requested: count, available })
            }
            Err(Shortage::Fragmented { available, largest }) => {
                Err(IpamError::Fragmented { requested: count, available, largest_free_block: largest })
            }
        }
    }

    /// Allocates exactly `start..=end`, which must lie in the allocatable range and clear of
    /// reserved ranges and allocations.
    pub fn allocate_pinned(&mut self, start: IpAddr, end: IpAddr) -> Result<Allocation, IpamError> {
        let (s, e) = self.check_range(start, end)?;
        core!(&mut self.core, c => c.insert(s, e));
        Ok(self.allocation(s, e))
    }

    /// Whether `start..=end` could be pinned now, and if not, why; it returns the offsets.
    /// The controller also uses it to find loaded allocations that a changed spec now forbids.
    pub fn check_range(&self, start: IpAddr, end: IpAddr) -> Result<(u128, u128), IpamError> {
        let (s, e) = self.offsets(start, end)?;
        if s < self.lo || e > self.hi {
            let (range_start, range_end) = self.allocatable();
            return Err(IpamError::OutsidePool { start, end, range_start, range_end });
        }
        match core!(&self.core, c => c.first_conflict(s, e)) {
            None => Ok((s, e)),
            Some(Conflict::Reserved { at }) => {
                let address = self.addr(at);
                let reserved = self.reserved_holding(address);
                Err(IpamError::ConflictsWithReserved { start, end, reserved, address })
            }
            Some(Conflict::Allocation { start: a, end: b, at }) => Err(IpamError::ConflictsWithAllocation {
                start,
                end,
                allocation: self.allocation(a, b),
                address: self.addr(at),
            }),
        }
    }

    /// Whether `start..=end` breaks the pool's spec (outside the allocatable range, or over a
    /// reserved range), whatever allocations hold: how the controller finds allocations that a
    /// change of the spec stranded.
    pub fn breaks_spec(&self, start: IpAddr, end: IpAddr) -> Option<IpamError> {
        let (s, e) = match self.offsets(start, end) {
            Ok(offsets) => offsets,
            Err(error) => return Some(error),
        };
        if s < self.lo || e > self.hi {
            let (range_start, range_end) = self.allocatable();
            return Some(IpamError::OutsidePool { start, end, range_start, range_end });
        }
        let at = core!(&self.core, c => c.first_reserved(s, e))?;
        let address = self.addr(at);
        Some(IpamError::ConflictsWithReserved {
            start,
            end,
            reserved: self.reserved_holding(address),
            address,
        })
    }

    /// Loads an allocation that exists already (from an IPAllocation's status). One that overlaps
    /// another allocation is refused; one outside the allocatable range or over a reserved range
    /// (the spec changed since) is kept so that its addresses are not handed out again.
    pub fn insert_existing(&mut self, start: IpAddr, end: IpAddr) -> Result<Allocation, IpamError> {
        let (s, e) = self.offsets(start, end)?;
        if let Some((a, b, at)) = core!(&self.core, c => c.first_allocation_overlap(s, e)) {
            return Err(IpamError::ConflictsWithAllocation {
                start,
                end,
                allocation: self.allocation(a, b),
                address: self.addr(at),
            });
        }
        core!(&mut self.core, c => c.insert(s, e));
        Ok(self.allocation(s, e))
    }

    /// Loads many existing allocations at once, as [`Pool::insert_existing`] one after the other
    /// in the order given (of two that overlap, the earlier keeps its block), but in one sweep
    /// when the pool holds none yet and they are disjoint, the common case of a controller
    /// loading a pool. Returns the refused ones by their index in `blocks`.
    pub fn load(&mut self, blocks: &[(IpAddr, IpAddr)]) -> Vec<(usize, IpamError)> {
        let mut refused = Vec::new();
        let mut offsets = Vec::with_capacity(blocks.len());
        for (i, (start, end)) in blocks.iter().enumerate() {
            match self.offsets(*start, *end) {
                Ok((s, e)) => offsets.push((s, e, i)),
                Err(error) => refused.push((i, error)),
            }
        }
        let mut sorted: Vec<(u128, u128)> = offsets.iter().map(|(s, e, _)| (*s, *e)).collect();
        sorted.sort_unstable();
        let disjoint = sorted.windows(2).all(|w| w[1].0 > w[0].1);
        if self.stats().allocations == 0 && disjoint {
            core!(&mut self.core, c => c.load_disjoint(&sorted));
            return refused;
        }
        for (_, _, i) in offsets {
            if let Err(error) = self.insert_existing(blocks[i].0, blocks[i].1) {
                refused.push((i, error));
            }
        }
        refused.sort_by_key(|(i, _)| *i);
        refused
    }

    /// Returns the allocation `start..=end` to the pool; it must be exactly one allocation.
    pub fn release(&mut self, start: IpAddr, end: IpAddr) -> Result<Allocation, IpamError> {
        let (s, e) = self.offsets(start, end).map_err(|err| match err {
            IpamError::OutsideCidr { .. } => IpamError::NotAllocated { start, end },
            other => other,
        })?;
        if core!(&mut self.core, c => c.release(s, e)) {
            Ok(self.allocation(s, e))
        } else {
            Err(IpamError::NotAllocated { start, end })
        }
    }

    /// Every allocation, in address order.
    pub fn allocations(&self) -> Vec<Allocation> {
        core!(&self.core, c => c.allocations().map(|(s, e)| self.allocation(s, e)).collect())
    }

    /// The pool's figures.
    pub fn stats(&self) -> PoolStats {
        let (total, available, allocations, largest, free_blocks) = core!(&self.core, c => (
            c.total(), c.free_total(), c.allocation_count(), c.largest_free_block(), c.free_blocks()
        ));
        PoolStats {
            total,
            allocated: total - available,
            available,
            allocations,
            largest_free_block: largest,
            free_blocks,
            fragmentation_percent: fragmentation(largest, available, free_blocks),
        }
    }

    fn offsets(&self, start: IpAddr, end: IpAddr) -> Result<(u128, u128), IpamError> {
        for (what, addr) in [("start", start), ("end", end)] {
            if Family::of(addr) != self.family {
                return Err(IpamError::FamilyMismatch {
                    what: format!("{what} {addr}"),
                    found: Family::of(addr),
                    expected: self.family,
                    cidr: self.spec.cidr,
                });
            }
        }
        if to_u128(start) > to_u128(end) {
            return Err(IpamError::StartAfterEnd { start, end });
        }
        if !self.spec.cidr.contains(&start) || !self.spec.cidr.contains(&end) {
            return Err(IpamError::OutsideCidr { start, end, cidr: self.spec.cidr });
        }
        Ok((to_u128(start) - self.base, to_u128(end) - self.base))
    }

    fn addr(&self, offset: u128) -> IpAddr {
        from_u128(self.family, self.base + offset)
    }

    fn allocation(&self, s: u128, e: u128) -> Allocation {
        Allocation::new(self.addr(s), self.addr(e))
    }

    /// The lowest-starting reserved CIDR of the spec that holds `address`.
    fn reserved_holding(&self, address: IpAddr) -> IpNet {
        let mut holding: Vec<IpNet> =
            self.spec.reserved.iter().filter(|n| n.contains(&address)).copied().collect();
        holding.sort_by_key(|n| (to_u128(n.network()), n.prefix_len()));
        holding.first().copied().unwrap_or(self.spec.cidr)
    }
}

/// `100 - floor(largest * 100 / available)`, exact for any u128 (the product is taken in 256 bits).
fn fragmentation(largest: u128, available: u128, free_blocks: usize) -> u8 {
    if free_blocks <= 1 || available == 0 {
        return 0;
    }
    // The largest k in 0..=100 with k * available <= 100 * largest.
    let target = wide_mul(largest, 100);
    let (mut low, mut high) = (0u128, 100u128);
    while low < high {
        let mid = (low + high).div_ceil(2);
        if wide_mul(available, mid) <= target { low = mid } else { high = mid - 1 }
    }
    (100 - low) as u8
}

/// `x * k` as (high, low) 128-bit halves, for `k <= 2^64`.
fn wide_mul(x: u128, k: u128) -> (u128, u128) {
    let mask = u64::MAX as u128;
    let high_part = (x >> 64) * k;
    let low_part = (x & mask) * k;
    let (low, carry) = (high_part << 64).overflowing_add(low_part);
    ((high_part >> 64) + carry as u128, low)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragmentation_follows_the_formula_and_never_overflows() {
        assert_eq!(fragmentation(10, 10, 1), 0);
        assert_eq!(fragmentation(0, 0, 0), 0);
        assert_eq!(fragmentation(5, 10, 2), 50);
        assert_eq!(fragmentation(1680, 1743, 3), 4);
        assert_eq!(fragmentation(1, 3, 3), 67); // 100 - floor(33.3)
        let huge = u128::MAX - 7;
        assert_eq!(fragmentation(huge / 2, huge, 2), 50);
        assert_eq!(fragmentation(huge - 1, huge, 2), 1); // 99.99..% rounds down to 99
    }

    #[test]
    fn breaks_spec_ignores_allocations_and_names_the_reason() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let spec = PoolSpec::new("10.0.0.0/24".parse().unwrap())
            .with_allocatable(ip("10.0.0.16"), ip("10.0.0.200"))
            .with_reserved("10.0.0.32/29".parse().unwrap());
        let mut pool = Pool::new(spec).unwrap();
        pool.insert_existing(ip("10.0.0.16"), ip("10.0.0.23")).unwrap();
        assert_eq!(pool.breaks_spec(ip("10.0.0.16"), ip("10.0.0.23")), None);
        assert!(matches!(
            pool.breaks_spec(ip("10.0.0.8"), ip("10.0.0.17")),
            Some(IpamError::OutsidePool { .. })
        ));
        assert_eq!(
            pool.breaks_spec(ip("10.0.0.30"), ip("10.0.0.33")).map(|e| e.to_string()),
            Some(
                "10.0.0.30-10.0.0.33 conflicts with reserved range 10.0.0.32/29 at address 10.0.0.32".into()
            )
        );
        assert!(matches!(
            pool.breaks_spec(ip("10.0.1.1"), ip("10.0.1.2")),
            Some(IpamError::OutsideCidr { .. })
        ));
    }

    #[test]
    fn load_is_insert_existing_in_order() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let spec = PoolSpec::new("10.0.0.0/24".parse().unwrap())
            .with_allocatable(ip("10.0.0.16"), ip("10.0.0.200"))
            .with_reserved("10.0.0.32/29".parse().unwrap());
        let cases: Vec<Vec<(&str, &str)>> = vec![
            vec![("10.0.0.40", "10.0.0.47"), ("10.0.0.16", "10.0.0.16"), ("10.0.0.0", "10.0.0.3")],
            vec![("10.0.0.40", "10.0.0.47"), ("10.0.0.44", "10.0.0.50"), ("10.0.1.0", "10.0.1.1")],
            vec![("10.0.0.30", "10.0.0.35"), ("10.0.0.200", "10.0.0.200"), ("10.0.0.17", "10.0.0.29")],
        ];
        for blocks in cases {
            let blocks: Vec<(IpAddr, IpAddr)> = blocks.iter().map(|(s, e)| (ip(s), ip(e))).collect();
            let mut one_by_one = Pool::new(spec.clone()).unwrap();
            let expected: Vec<usize> = blocks
                .iter()
                .enumerate()
                .filter(|(_, (s, e))| one_by_one.insert_existing(*s, *e).is_err())
                .map(|(i, _)| i)
                .collect();
            let mut loaded = Pool::new(spec.clone()).unwrap();
            let refused: Vec<usize> = loaded.load(&blocks).into_iter().map(|(i, _)| i).collect();
            assert_eq!(refused, expected, "{blocks:?}");
            assert_eq!(loaded.stats(), one_by_one.stats(), "{blocks:?}");
            assert_eq!(loaded.allocations(), one_by_one.allocations());
            assert_eq!(loaded.allocate(3).ok(), one_by_one.allocate(3).ok());
        }
    }

    #[test]
    fn wide_mul_is_exact() {
        assert_eq!(wide_mul(u128::MAX, 1), (0, u128::MAX));
        assert_eq!(wide_mul(u128::MAX, 2), (1, u128::MAX - 1));
        assert_eq!(wide_mul(1 << 127, 100), (50, 0));
    }
}
