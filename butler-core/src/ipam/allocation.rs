//! [`Allocation`]: a contiguous block of addresses.

use std::fmt;
use std::net::IpAddr;

use super::addr::{Family, from_u128, to_u128};

/// The most addresses [`Allocation::addresses`] lists; larger allocations are allowed, but their
/// list is omitted and the CIDR form (or `start-end`) is the record. spec/002 lists up to
/// 65,536, but 65,536 IPv6 addresses take some 2 MB of JSON, beyond the 1.5 MiB that etcd keeps
/// of one object: such an allocation could never be written Allocated. 4,096 take at most
/// 170 KB.
pub const MAX_LISTED_ADDRESSES: u128 = 4_096;

/// A contiguous block of addresses, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Allocation {
    start: IpAddr,
    end: IpAddr,
}

/// The addresses of an allocation, or why they are not listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressList {
    /// Every address, in order.
    Listed(Vec<IpAddr>),
    /// The allocation holds more than [`MAX_LISTED_ADDRESSES`] addresses.
    Omitted { count: u128 },
}

impl Allocation {
    /// The block from `start` to `end`; both must be of one family and `start <= end`, which the
    /// pool guarantees for the allocations it returns.
    pub(crate) fn new(start: IpAddr, end: IpAddr) -> Allocation {
        debug_assert!(Family::of(start) == Family::of(end) && to_u128(start) <= to_u128(end));
        Allocation { start, end }
    }

    /// First address.
    pub fn start(&self) -> IpAddr {
        self.start
    }

    /// Last address.
    pub fn end(&self) -> IpAddr {
        self.end
    }

    /// Number of addresses.
    pub fn count(&self) -> u128 {
        to_u128(self.end) - to_u128(self.start) + 1
    }

    /// The address family.
    pub fn family(&self) -> Family {
        Family::of(self.start)
    }

    /// Whether `addr` lies inside the block.
    pub fn contains(&self, addr: IpAddr) -> bool {
        Family::of(addr) == self.family()
            && (to_u128(self.start)..=to_u128(self.end)).contains(&to_u128(addr))
    }

    /// Every address of the block, when there are at most [`MAX_LISTED_ADDRESSES`].
    pub fn addresses(&self) -> AddressList {
        let count = self.count();
        if count > MAX_LISTED_ADDRESSES {
            return AddressList::Omitted { count };
        }
        let (start, end) = (to_u128(self.start), to_u128(self.end));
        AddressList::Listed((start..=end).map(|v| from_u128(self.family(), v)).collect())
    }

    /// The prefix length when the block is a CIDR: a power-of-two size, start aligned to it.
    pub fn prefix_len(&self) -> Option<u8> {
        let count = self.count();
        if !count.is_power_of_two() || !to_u128(self.start).is_multiple_of(count) {
            return None;
        }
        Some((self.family().bits() - count.trailing_zeros()) as u8)
    }
}

impl fmt::Display for Allocation {
    /// CIDR form (`10.40.1.0/29`) when the block is one, else `start-end`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.prefix_len() {
            Some(prefix) => write!(f, "{}/{prefix}", self.start),
            None => write!(f, "{}-{}", self.start, self.end),
        }
    }
}

impl fmt::Display for AddressList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddressList::Listed(addrs) => {
                let text: Vec<String> = addrs.iter().map(IpAddr::to_string).collect();
                f.write_str(&text.join(", "))
            }
            AddressList::Omitted { count } => {
                write!(f, "{count} addresses, not listed (more than {MAX_LISTED_ADDRESSES})")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(start: &str, end: &str) -> Allocation {
        Allocation::new(start.parse().unwrap(), end.parse().unwrap())
    }

    #[test]
    fn text_form_is_cidr_only_for_aligned_powers_of_two() {
        let cases = [
            (("10.40.1.0", "10.40.1.7"), "10.40.1.0/29"),
            (("10.40.1.8", "10.40.1.8"), "10.40.1.8/32"),
            (("10.40.1.3", "10.40.1.10"), "10.40.1.3-10.40.1.10"),
            (("10.40.1.4", "10.40.1.11"), "10.40.1.4-10.40.1.11"), // size 8, aligned to 4 only
            (("10.40.1.0", "10.40.1.5"), "10.40.1.0-10.40.1.5"),   // size 6
            (("0.0.0.0", "255.255.255.255"), "0.0.0.0/0"),
            (("2001:db8::", "2001:db8::ffff"), "2001:db8::/112"),
            (
                ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127",
            ),
        ];
        for ((start, end), text) in cases {
            assert_eq!(a(start, end).to_string(), text);
        }
    }

    #[test]
    fn addresses_are_listed_up_to_the_limit() {
        let small = a("10.0.0.254", "10.0.1.1");
        assert_eq!(small.addresses().to_string(), "10.0.0.254, 10.0.0.255, 10.0.1.0, 10.0.1.1");
        let limit = a("10.0.0.0", "10.0.15.255");
        assert!(matches!(limit.addresses(), AddressList::Listed(v) if v.len() == 4_096));
        let over = a("10.0.0.0", "10.0.16.0");
        assert_eq!(over.addresses(), AddressList::Omitted { count: 4_097 });
        assert_eq!(over.addresses().to_string(), "4097 addresses, not listed (more than 4096)");
        let v6 = a("2001:db8::", "2001:db8::ffff:ffff:ffff:ffff");
        assert_eq!(v6.count(), 1 << 64);
        assert!(matches!(v6.addresses(), AddressList::Omitted { .. }));
    }

    #[test]
    fn contains_checks_family_and_bounds() {
        let block = a("10.0.0.4", "10.0.0.7");
        assert!(block.contains("10.0.0.4".parse().unwrap()));
        assert!(block.contains("10.0.0.7".parse().unwrap()));
        assert!(!block.contains("10.0.0.8".parse().unwrap()));
        assert!(!block.contains("::a00:4".parse().unwrap()));
    }
}
