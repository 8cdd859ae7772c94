//! Property test: random sequences of allocate / pinned / release / load on small random pools
//! give, step by step, the same choices, errors and statistics as a plain set-of-addresses
//! model, and never an overlap, a reserved address, or an address outside the pool.

use std::collections::BTreeSet;
use std::net::IpAddr;

use butler_core::ipam::{Allocation, IpamError, Pool, PoolSpec, PoolStats};
use ipnet::IpNet;
use proptest::prelude::*;

/// Bases for the small pools: ordinary ones and ones that end at the last address of the family.
const BASES: [&str; 4] =
    ["10.0.0.0", "255.255.255.192", "2001:db8::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffc0"];

fn to_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u32::from(a) as u128,
        IpAddr::V6(a) => u128::from(a),
    }
}

#[derive(Debug, Clone)]
struct Setup {
    base: IpAddr,
    prefix_len: u8, // host bits 0..=6: up to 64 addresses
    allocatable: Option<(u128, u128)>,
    reserved: Vec<(u128, u8)>, // offset and host bits of each reserved CIDR
}

#[derive(Debug, Clone)]
enum Op {
    Allocate(u128),
    Pinned(u128, u128),
    Release(usize),
    ReleaseRange(u128, u128),
    Load(u128, u128),
}

/// Offsets can reach past the CIDR (up to 80) to exercise "outside" errors.
fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u128..12).prop_map(Op::Allocate),
        2 => (0u128..80, 0u128..80).prop_map(|(a, b)| Op::Pinned(a, b)),
        3 => (0usize..16).prop_map(Op::Release),
        1 => (0u128..80, 0u128..80).prop_map(|(a, b)| Op::ReleaseRange(a, b)),
        1 => (0u128..80, 0u128..80).prop_map(|(a, b)| Op::Load(a, b)),
    ]
}

fn setup() -> impl Strategy<Value = Setup> {
    (0usize..4, 0u32..=6)
        .prop_flat_map(|(b, host_bits)| {
            let size = 1u128 << host_bits;
            (
                Just(b),
                Just(host_bits),
                prop::option::of((0..size, 0..size)),
                prop::collection::vec((0..size, 0u8..=3), 0..4),
            )
        })
        .prop_map(|(b, host_bits, allocatable, reserved)| {
            let base: IpAddr = BASES[b].parse().unwrap();
            let bits = if base.is_ipv4() { 32 } else { 128 };
            Setup {
                base,
                prefix_len: (bits - host_bits) as u8,
                allocatable: allocatable.map(|(a, b)| (a.min(b), a.max(b))),
                reserved: reserved.into_iter().map(|(o, hb)| (o, hb.min(host_bits as u8))).collect(),
            }
        })
}

/// The model: plain sets of addresses and a list of allocations.
struct Model {
    setup: Setup,
    size: u128,
    lo: u128,
    hi: u128,
    reserved: BTreeSet<u128>,
    allocations: Vec<(u128, u128)>,
}

impl Model {
    fn new(setup: &Setup) -> Model {
        let bits = if setup.base.is_ipv4() { 32 } else { 128 };
        let size = 1u128 << (bits - setup.prefix_len as u32);
        let (lo, hi) = setup.allocatable.unwrap_or((0, size - 1));
        let mut model =
            Model { setup: setup.clone(), size, lo, hi, reserved: BTreeSet::new(), allocations: Vec::new() };
        for net in model.reserved_nets() {
            let start = to_u128(net.network()) - to_u128(setup.base);
            model.reserved.extend(start..=to_u128(net.broadcast()) - to_u128(setup.base));
        }
        model
    }

    fn addr(&self, offset: u128) -> IpAddr {
        self.checked_addr(offset).expect("offset inside the address family")
    }

    /// The address at `offset` from the base, if the family has one there.
    fn checked_addr(&self, offset: u128) -> Option<IpAddr> {
        let v = to_u128(self.setup.base).checked_add(offset)?;
        if self.setup.base.is_ipv4() {
            u32::try_from(v).ok().map(|v| IpAddr::from(v.to_be_bytes()))
        } else {
            Some(IpAddr::from(v.to_be_bytes()))
        }
    }

    fn alloc(&self, s: u128, e: u128) -> Allocation {
        // Build through a throwaway pool to get an Allocation value (its constructor is private).
        let mut p = Pool::new(PoolSpec::new(self.cidr())).unwrap();
        p.insert_existing(self.addr(s), self.addr(e)).unwrap()
    }

    fn cidr(&self) -> IpNet {
        IpNet::new(self.setup.base, self.setup.prefix_len).unwrap()
    }

    /// The reserved CIDRs of the setup.
    fn reserved_nets(&self) -> Vec<IpNet> {
        let bits = if self.setup.base.is_ipv4() { 32 } else { 128 };
        let net = |(offset, host_bits): &(u128, u8)| {
            let block = 1u128 << host_bits;
            IpNet::new(self.addr(offset / block * block), bits - host_bits).unwrap()
        };
        self.setup.reserved.iter().map(net).collect()
    }

    /// The lowest-starting reserved CIDR (the larger on a tie) that holds `offset`.
    fn reserved_cidr_holding(&self, offset: u128) -> IpNet {
        let mut nets: Vec<IpNet> =
            self.reserved_nets().into_iter().filter(|n| n.contains(&self.addr(offset))).collect();
        nets.sort_by_key(|n| (to_u128(n.network()), n.prefix_len()));
        nets[0]
    }

    fn allocated(&self, o: u128) -> Option<(u128, u128)> {
        self.allocations.iter().copied().find(|(s, e)| (*s..=*e).contains(&o))
    }

    fn is_free(&self, o: u128) -> bool {
        (self.lo..=self.hi).contains(&o) && !self.reserved.contains(&o) && self.allocated(o).is_none()
    }

    fn free_blocks(&self) -> Vec<(u128, u128)> {
        let mut blocks = Vec::new();
        let mut current: Option<(u128, u128)> = None;
        for o in self.lo..=self.hi {
            if self.is_free(o) {
                current = Some(current.map_or((o, o), |(s, _)| (s, o)));
            } else if let Some(b) = current.take() {
                blocks.push(b);
            }
        }
        blocks.extend(current);
        blocks
    }

    fn stats(&self) -> PoolStats {
        let allowed = (self.lo..=self.hi).filter(|o| !self.reserved.contains(o)).count() as u128;
        let blocks = self.free_blocks();
        let available: u128 = blocks.iter().map(|(s, e)| e - s + 1).sum();
        let largest = blocks.iter().map(|(s, e)| e - s + 1).max().unwrap_or(0);
        let fragmentation = if blocks.len() <= 1 { 0 } else { (100 - largest * 100 / available) as u8 };
        PoolStats {
            total: allowed,
            allocated: allowed - available,
            available,
            allocations: self.allocations.len(),
            largest_free_block: largest,
            free_blocks: blocks.len(),
            fragmentation_percent: fragmentation,
        }
    }

    fn allocate(&mut self, count: u128) -> Result<Allocation, IpamError> {
        if count == 0 {
            return Err(IpamError::CountBelowOne { count });
        }
        let blocks = self.free_blocks();
        let best = blocks.iter().filter(|(s, e)| e - s + 1 >= count).min_by_key(|(s, e)| (e - s + 1, *s));
        match best {
            Some((s, _)) => {
                self.allocations.push((*s, s + count - 1));
                Ok(self.alloc(*s, s + count - 1))
            }
            None => {
                let st = self.stats();
                Err(if st.available < count {
                    IpamError::Exhausted { requested: count, available: st.available }
                } else {
                    IpamError::Fragmented {
                        requested: count,
                        available: st.available,
                        largest_free_block: st.largest_free_block,
                    }
                })
            }
        }
    }

    /// The shared checks of pinned, load and release: range order and CIDR.
    fn offsets(&self, s: u128, e: u128) -> Result<(), IpamError> {
        if s > e {
            return Err(IpamError::StartAfterEnd { start: self.addr(s), end: self.addr(e) });
        }
        if e >= self.size {
            return Err(IpamError::OutsideCidr { start: self.addr(s), end: self.addr(e), cidr: self.cidr() });
        }
        Ok(())
    }

    fn alloc_conflict(&self, s: u128, e: u128) -> Option<(u128, (u128, u128))> {
        (s..=e).find_map(|o| self.allocated(o).map(|a| (o, a)))
    }

    fn pinned(&mut self, s: u128, e: u128) -> Result<Allocation, IpamError> {
        self.offsets(s, e)?;
        let (start, end) = (self.addr(s), self.addr(e));
        if s < self.lo || e > self.hi {
            return Err(IpamError::OutsidePool {
                start,
                end,
                range_start: self.addr(self.lo),
                range_end: self.addr(self.hi),
            });
        }
        let reserved = (s..=e).find(|o| self.reserved.contains(o));
        let allocation = self.alloc_conflict(s, e);
        match (reserved, allocation) {
            (Some(r), a) if a.is_none_or(|(at, _)| r <= at) => Err(IpamError::ConflictsWithReserved {
                start,
                end,
                reserved: self.reserved_cidr_holding(r),
                address: self.addr(r),
            }),
            (_, Some((at, (a, b)))) => Err(IpamError::ConflictsWithAllocation {
                start,
                end,
                allocation: self.alloc(a, b),
                address: self.addr(at),
            }),
            _ => {
                self.allocations.push((s, e));
                Ok(self.alloc(s, e))
            }
        }
    }

    fn load(&mut self, s: u128, e: u128) -> Result<Allocation, IpamError> {
        self.offsets(s, e)?;
        if let Some((at, (a, b))) = self.alloc_conflict(s, e) {
            return Err(IpamError::ConflictsWithAllocation {
                start: self.addr(s),
                end: self.addr(e),
                allocation: self.alloc(a, b),
                address: self.addr(at),
            });
        }
        self.allocations.push((s, e));
        Ok(self.alloc(s, e))
    }

    fn release(&mut self, s: u128, e: u128) -> Result<Allocation, IpamError> {
        if s > e {
            return Err(IpamError::StartAfterEnd { start: self.addr(s), end: self.addr(e) });
        }
        match self.allocations.iter().position(|a| *a == (s, e)) {
            Some(i) => {
                self.allocations.remove(i);
                Ok(self.alloc(s, e))
            }
            None => Err(IpamError::NotAllocated { start: self.addr(s), end: self.addr(e) }),
        }
    }
}

fn build(setup: &Setup, model: &Model) -> Pool {
    let mut spec = PoolSpec::new(model.cidr());
    if let Some((a, b)) = setup.allocatable {
        spec = spec.with_allocatable(model.addr(a), model.addr(b));
    }
    for net in model.reserved_nets() {
        spec = spec.with_reserved(net);
    }
    Pool::new(spec).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_pool_matches_the_model(setup in setup(), ops in prop::collection::vec(op(), 1..40)) {
        let mut model = Model::new(&setup);
        let mut pool = build(&setup, &model);
        prop_assert_eq!(pool.stats(), model.stats());
        for op in ops {
            let offsets = match op {
                Op::Pinned(a, b) | Op::Load(a, b) | Op::ReleaseRange(a, b) => vec![a, b],
                _ => vec![],
            };
            // Past the last address of the family there is nothing to ask for.
            if offsets.iter().any(|o| model.checked_addr(*o).is_none()) {
                continue;
            }
            let (got, want) = match op {
                Op::Allocate(n) => (pool.allocate(n), model.allocate(n)),
                Op::Pinned(a, b) => (pool.allocate_pinned(model.addr(a), model.addr(b)), model.pinned(a, b)),
                Op::Load(a, b) => (pool.insert_existing(model.addr(a), model.addr(b)), model.load(a, b)),
                Op::Release(i) => {
                    let Some(&(s, e)) = model.allocations.get(i % model.allocations.len().max(1)) else { continue };
                    (pool.release(model.addr(s), model.addr(e)), model.release(s, e))
                }
                Op::ReleaseRange(a, b) => (pool.release(model.addr(a), model.addr(b)), model.release(a, b)),
            };
            prop_assert_eq!(&got, &want, "after {:?}", op);
            if let (Ok(a), Op::Allocate(_) | Op::Pinned(..)) = (&got, &op) {
                // A new allocation never holds a reserved or unallocatable address.
                let (s, e) = (to_u128(a.start()) - to_u128(setup.base), to_u128(a.end()) - to_u128(setup.base));
                prop_assert!((s..=e).all(|o| (model.lo..=model.hi).contains(&o) && !model.reserved.contains(&o)));
            }
            prop_assert_eq!(pool.stats(), model.stats(), "stats after {:?}", op);
            let mut all = pool.allocations();
            all.sort();
            for pair in all.windows(2) {
                prop_assert!(to_u128(pair[0].end()) < to_u128(pair[1].start()), "overlap {} {}", pair[0], pair[1]);
            }
        }
    }

    #[test]
    fn loading_at_once_is_loading_one_by_one(
        setup in setup(),
        blocks in prop::collection::vec((0u128..80, 0u128..12), 0..24),
    ) {
        let model = Model::new(&setup);
        let blocks: Vec<(IpAddr, IpAddr)> = blocks
            .into_iter()
            .filter_map(|(s, len)| Some((model.checked_addr(s)?, model.checked_addr(s + len)?)))
            .collect();
        let mut one_by_one = build(&setup, &model);
        let expected: Vec<(usize, IpamError)> = blocks
            .iter()
            .enumerate()
            .filter_map(|(i, (s, e))| one_by_one.insert_existing(*s, *e).err().map(|e| (i, e)))
            .collect();
        let mut at_once = build(&setup, &model);
        prop_assert_eq!(at_once.load(&blocks), expected);
        prop_assert_eq!(at_once.stats(), one_by_one.stats());
        prop_assert_eq!(at_once.allocations(), one_by_one.allocations());
        for n in 1..4 {
            prop_assert_eq!(at_once.allocate(n), one_by_one.allocate(n));
        }
    }
}
