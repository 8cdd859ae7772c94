//! [`IpamError`]: why the allocator refused.

use std::net::IpAddr;

use ipnet::IpNet;
use thiserror::Error;

use super::addr::Family;
use super::allocation::Allocation;

/// Why a pool could not be built or a request could not be served. Each message names the
/// addresses involved and, where there is one, what to do.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IpamError {
    #[error(
        "{what} is {found}, but the pool {cidr} is {expected}: a pool holds addresses of one family only"
    )]
    FamilyMismatch { what: String, found: Family, expected: Family, cidr: IpNet },
    #[error("the pool {cidr} is too large: an IPv6 pool needs a prefix of at least /1")]
    PoolTooLarge { cidr: IpNet },
    #[error(
        "the allocatable range {start}-{end} is not inside the pool {cidr}; move it inside or widen the CIDR"
    )]
    AllocatableOutsideCidr { start: IpAddr, end: IpAddr, cidr: IpNet },
    #[error("{start}-{end} is not a range: its start comes after its end")]
    StartAfterEnd { start: IpAddr, end: IpAddr },
    #[error("cannot allocate {count} addresses: ask for at least 1")]
    CountBelowOne { count: u128 },
    #[error(
        "the pool is exhausted: {requested} addresses asked, {available} free; release allocations or add a pool"
    )]
    Exhausted { requested: u128, available: u128 },
    #[error(
        "the pool is fragmented: {requested} addresses asked and {available} free, but the largest free block holds {largest_free_block}; ask for fewer or add a pool"
    )]
    Fragmented { requested: u128, available: u128, largest_free_block: u128 },
    #[error("{start}-{end} is outside the pool's allocatable range {range_start}-{range_end}")]
    OutsidePool { start: IpAddr, end: IpAddr, range_start: IpAddr, range_end: IpAddr },
    #[error("{start}-{end} is outside the pool {cidr}")]
    OutsideCidr { start: IpAddr, end: IpAddr, cidr: IpNet },
    #[error("{start}-{end} conflicts with reserved range {reserved} at address {address}")]
    ConflictsWithReserved { start: IpAddr, end: IpAddr, reserved: IpNet, address: IpAddr },
    #[error("{start}-{end} conflicts with allocation {allocation} at address {address}")]
    ConflictsWithAllocation { start: IpAddr, end: IpAddr, allocation: Allocation, address: IpAddr },
    #[error("{start}-{end} is not an allocation of this pool")]
    NotAllocated { start: IpAddr, end: IpAddr },
}
