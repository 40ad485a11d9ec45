//! Several FIBs (routing tables) and the policy rules that pick one for a
//! packet: FreeBSD's `setfib`, which F-Stack's `ipfw_pr` sets up as
//! `ipfw add 100 setfib N ip from PREFIX to any out`.
//!
//! FIB 0 is the stack's main table ([`Stack::routes`](crate::Stack::routes));
//! FIBs 1..[`MAX_FIBS`] are kept here, made when a route or a rule first
//! names them.  Rules are tried in ascending priority (ipfw's rule
//! number); the first that matches a packet's source gives its FIB, and
//! a packet no rule matches uses FIB 0.  As in FreeBSD, the chosen FIB is
//! used alone: a destination it has no route to is unreachable.

use core::fmt;
use core::net::IpAddr;

use crate::iface::IfaceId;
use crate::route::{IpCidr, RouteTable};

/// FIBs at most, FIB 0 included.
pub const MAX_FIBS: u16 = 64;
/// Routes at most in each FIB beside the main one.
pub const FIB_ROUTE_LIMIT: usize = 4096;
/// Rules at most.
pub const MAX_RULES: usize = 1024;

/// Which packets a rule takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleMatch {
    /// Packets whose source address lies in the prefix (`ipfw_pr`,
    /// `ipfw ... from PREFIX`).
    Source(IpCidr),
    /// Packets whose source address is one of the interface's own
    /// addresses (VIPs included), of either family.
    Interface(IfaceId),
    /// Packets of sockets with this SO_MARK (Linux's `ip rule fwmark`);
    /// never 0, which is an unmarked socket's.
    Mark(u32),
}

impl fmt::Display for RuleMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleMatch::Source(p) => write!(f, "from {p}"),
            RuleMatch::Interface(i) => write!(f, "from {i}'s addresses"),
            RuleMatch::Mark(m) => write!(f, "mark {m}"),
        }
    }
}

/// One policy rule: packets it matches use FIB `fib`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PolicyRule {
    /// Rules are tried in ascending priority; two rules may share one.
    pub priority: u32,
    pub matches: RuleMatch,
    pub fib: u16,
}

impl fmt::Display for PolicyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} setfib {} {}", self.priority, self.fib, self.matches)
    }
}

/// Why a FIB or rule change was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyError {
    /// The FIB number is `MAX_FIBS` or more.
    NoSuchFib(u16),
    RuleExists,
    NoSuchRule,
    TooManyRules,
    /// A rule by mark 0, which every unmarked socket has.
    MarkZero,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyError::NoSuchFib(n) => {
                write!(f, "FIB {n} does not exist (FIBs are 0..{})", MAX_FIBS - 1)
            }
            PolicyError::RuleExists => f.write_str("the same rule exists"),
            PolicyError::NoSuchRule => f.write_str("no such rule"),
            PolicyError::TooManyRules => write!(f, "more than {MAX_RULES} rules"),
            PolicyError::MarkZero => {
                f.write_str("mark 0 is every unmarked socket's; a rule by mark takes 1..4294967295")
            }
        }
    }
}

/// The FIBs beside the main one, and the rules.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    /// FIB n is `fibs[n - 1]`; grown on demand.
    fibs: Vec<RouteTable>,
    /// Ascending priority; among equal priorities, in the order added.
    rules: Vec<PolicyRule>,
}

impl Policy {
    /// No rules: every packet uses the main FIB.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// FIB `n` (1..), if it was made.
    pub(crate) fn fib(&self, n: u16) -> Option<&RouteTable> {
        self.fibs.get(usize::from(n).checked_sub(1)?)
    }

    /// FIB `n` (1..`MAX_FIBS`), made (empty) if it was not.
    pub(crate) fn fib_mut(&mut self, n: u16) -> Result<&mut RouteTable, PolicyError> {
        if n == 0 || n >= MAX_FIBS {
            return Err(PolicyError::NoSuchFib(n));
        }
        let at = usize::from(n) - 1;
        while self.fibs.len() <= at {
            self.fibs.push(RouteTable::new(FIB_ROUTE_LIMIT));
        }
        self.fibs.get_mut(at).ok_or(PolicyError::NoSuchFib(n))
    }

    /// How many FIBs exist, FIB 0 included.
    pub(crate) fn fib_count(&self) -> u16 {
        self.fibs.len() as u16 + 1
    }

    pub(crate) fn rules(&self) -> &[PolicyRule] {
        &self.rules
    }

    pub(crate) fn add_rule(&mut self, rule: PolicyRule) -> Result<(), PolicyError> {
        if rule.fib >= MAX_FIBS {
            return Err(PolicyError::NoSuchFib(rule.fib));
        }
        if rule.matches == RuleMatch::Mark(0) {
            return Err(PolicyError::MarkZero);
        }
        if self.rules.contains(&rule) {
            return Err(PolicyError::RuleExists);
        }
        if self.rules.len() >= MAX_RULES {
            return Err(PolicyError::TooManyRules);
        }
        if rule.fib != 0 {
            self.fib_mut(rule.fib)?;
        }
        let at = self.rules.partition_point(|r| r.priority <= rule.priority);
        self.rules.insert(at, rule);
        Ok(())
    }

    pub(crate) fn remove_rule(&mut self, rule: &PolicyRule) -> Result<(), PolicyError> {
        let at = self
            .rules
            .iter()
            .position(|r| r == rule)
            .ok_or(PolicyError::NoSuchRule)?;
        self.rules.remove(at);
        Ok(())
    }

    /// Forgets interface `iface`: the rules that name it go, and its
    /// routes in every FIB.
    pub(crate) fn remove_iface(&mut self, iface: IfaceId) {
        self.rules
            .retain(|r| r.matches != RuleMatch::Interface(iface));
        for fib in &mut self.fibs {
            fib.remove_iface(iface);
        }
    }

    /// The FIB of the first rule that matches a packet from `src` (`None`:
    /// not chosen yet) of a socket marked `mark`, 0 if none does;
    /// `owns(iface, ip)` tells whether `ip` is an address of `iface`.
    pub(crate) fn fib_of(
        &self,
        src: Option<IpAddr>,
        mark: u32,
        owns: impl Fn(IfaceId, IpAddr) -> bool,
    ) -> u16 {
        self.rules
            .iter()
            .find(|r| match r.matches {
                RuleMatch::Source(p) => src.is_some_and(|s| p.contains(s)),
                RuleMatch::Interface(i) => src.is_some_and(|s| owns(i, s)),
                RuleMatch::Mark(m) => m == mark,
            })
            .map_or(0, |r| r.fib)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    fn src(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    }

    fn prefix(a: u8, b: u8, c: u8, d: u8, len: u8) -> RuleMatch {
        RuleMatch::Source(IpCidr::new(src(a, b, c, d), len).unwrap())
    }

    #[test]
    fn first_rule_by_priority_wins() {
        let mut p = Policy::default();
        assert!(p.is_empty());
        p.add_rule(PolicyRule {
            priority: 200,
            matches: prefix(10, 99, 0, 0, 16),
            fib: 2,
        })
        .unwrap();
        p.add_rule(PolicyRule {
            priority: 100,
            matches: prefix(10, 99, 1, 0, 24),
            fib: 1,
        })
        .unwrap();
        let none = |_, _| false;
        assert_eq!(p.fib_of(Some(src(10, 99, 1, 7)), 0, none), 1);
        assert_eq!(p.fib_of(Some(src(10, 99, 2, 7)), 0, none), 2);
        assert_eq!(p.fib_of(Some(src(192, 0, 2, 1)), 0, none), 0);
        // The rules made FIBs 1 and 2.
        assert_eq!(p.fib_count(), 3);
        assert!(p.fib(2).is_some_and(|t| t.is_empty()));
        assert!(p.fib(0).is_none());
        assert!(p.fib(3).is_none());
    }

    #[test]
    fn interface_rules_ask_who_owns_the_source() {
        let mut p = Policy::default();
        p.add_rule(PolicyRule {
            priority: 1,
            matches: RuleMatch::Interface(IfaceId(3)),
            fib: 5,
        })
        .unwrap();
        let owns = |i: IfaceId, ip: IpAddr| i == IfaceId(3) && ip == src(10, 99, 3, 2);
        assert_eq!(p.fib_of(Some(src(10, 99, 3, 2)), 0, owns), 5);
        assert_eq!(p.fib_of(Some(src(10, 99, 3, 3)), 0, owns), 0);
    }

    #[test]
    fn mark_rules_take_marked_packets_of_any_source() {
        let mut p = Policy::default();
        p.add_rule(PolicyRule {
            priority: 10,
            matches: RuleMatch::Mark(7),
            fib: 2,
        })
        .unwrap();
        p.add_rule(PolicyRule {
            priority: 20,
            matches: prefix(10, 99, 1, 0, 24),
            fib: 1,
        })
        .unwrap();
        let none = |_, _| false;
        assert_eq!(p.fib_of(Some(src(10, 99, 1, 7)), 7, none), 2);
        assert_eq!(p.fib_of(None, 7, none), 2);
        assert_eq!(p.fib_of(Some(src(10, 99, 1, 7)), 8, none), 1);
        assert_eq!(p.fib_of(Some(src(10, 99, 1, 7)), 0, none), 1);
        assert_eq!(p.fib_of(None, 0, none), 0);
        assert_eq!(
            p.add_rule(PolicyRule {
                priority: 1,
                matches: RuleMatch::Mark(0),
                fib: 1,
            }),
            Err(PolicyError::MarkZero)
        );
    }

    #[test]
    fn bad_fibs_and_duplicate_rules_are_refused() {
        let mut p = Policy::default();
        let rule = PolicyRule {
            priority: 100,
            matches: prefix(10, 99, 1, 0, 24),
            fib: 1,
        };
        p.add_rule(rule).unwrap();
        assert_eq!(p.add_rule(rule), Err(PolicyError::RuleExists));
        assert_eq!(
            p.add_rule(PolicyRule {
                fib: MAX_FIBS,
                ..rule
            }),
            Err(PolicyError::NoSuchFib(MAX_FIBS))
        );
        assert_eq!(p.fib_mut(0).err(), Some(PolicyError::NoSuchFib(0)));
        p.remove_rule(&rule).unwrap();
        assert_eq!(p.remove_rule(&rule), Err(PolicyError::NoSuchRule));
    }
}
