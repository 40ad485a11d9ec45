//! `ustack rule`: the policy rules that pick the FIB (routing table) a
//! packet uses, as F-Stack's `ipfw add N setfib F ip from PREFIX to any
//! out` and `ipfw_pr` set them:
//!
//! ```text
//! ustack rule [show]
//! ustack rule add [PRIORITY] (from PREFIX | iface IFACE | mark M) fib N
//! ustack rule delete [PRIORITY] (from PREFIX | iface IFACE | mark M) fib N
//! ```
//!
//! PRIORITY (default 100) orders the rules as ipfw's rule number does;
//! `setfib N` and `table N` say `fib N` too.  `from` takes `10.0.0.0/24`,
//! an address, or `ADDR NETMASK` (`ipfw_pr`'s form); `mark` (`fwmark`, as
//! `ip rule`) the SO_MARK of the sockets whose packets it takes (1 and
//! up; 0 is every unmarked socket's).  A change goes to every engine.

use std::net::Ipv4Addr;
use std::process::ExitCode;

use runtime::control::client::EngineSocket;
use runtime::control::proto::{Reply, Request, RuleSpec};

use super::{ask_all, change, exit, print_json, report_errors, Common, Usage};

/// The priority of a rule that names none.
const DEFAULT_PRIORITY: u32 = 100;

pub fn main(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        [] | ["show"] | ["list"] => Ok(show(c, sockets)),
        ["add", rest @ ..] => Ok(change(
            c,
            sockets,
            &Request::RuleAdd {
                rule: parse_rule(rest)?,
            },
        )),
        ["delete" | "del", rest @ ..] => Ok(change(
            c,
            sockets,
            &Request::RuleDelete {
                rule: parse_rule(rest)?,
            },
        )),
        _ => Err(Usage(format!("cannot read `rule {}`", args.join(" ")))),
    }
}

/// The prefix length of a dotted netmask (`255.255.255.0` is 24), when it
/// is one (contiguous ones).
fn netmask_len(s: &str) -> Option<u8> {
    let m = u32::from(s.parse::<Ipv4Addr>().ok()?);
    let len = m.leading_ones();
    (m.checked_shl(len).unwrap_or(0) == 0).then_some(len as u8)
}

/// A mark as `ip rule` takes it: decimal or `0x` hex, never 0.
fn parse_mark(s: &str) -> Option<u32> {
    let m = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
        None => s.parse().ok()?,
    };
    (m != 0).then_some(m)
}

/// A rule's words after `add` or `delete`.
pub(crate) fn parse_rule(words: &[&str]) -> Result<RuleSpec, Usage> {
    let mut rule = RuleSpec {
        priority: DEFAULT_PRIORITY,
        from: None,
        iface: None,
        mark: None,
        fib: 0,
    };
    let mut fib = None;
    let mut it = words.iter().copied().peekable();
    if let Some(p) = it.peek().and_then(|w| w.parse::<u32>().ok()) {
        rule.priority = p;
        it.next();
    }
    while let Some(w) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .ok_or_else(|| Usage(format!("`{w}` needs {what}")))
        };
        match w {
            "from" => {
                let p = value("a prefix (10.0.0.0/24)")?;
                if rule.from.replace(p.to_string()).is_some() {
                    return Err(Usage("one `from` per rule".into()));
                }
            }
            "iface" | "via" | "dev" => {
                let i = value("an interface name")?;
                if rule.iface.replace(i.to_string()).is_some() {
                    return Err(Usage("one `iface` per rule".into()));
                }
            }
            "fib" | "setfib" | "table" => {
                let n = value("a FIB number")?;
                let n: u32 = n
                    .parse()
                    .map_err(|_| Usage(format!("{w} {n}: not a FIB number")))?;
                if fib.replace(n).is_some() {
                    return Err(Usage("one FIB per rule".into()));
                }
            }
            "mark" | "fwmark" => {
                let m = value("a socket mark (SO_MARK)")?;
                let m = parse_mark(m).ok_or_else(|| {
                    Usage(format!(
                        "{w} {m}: not a mark (1..4294967295, decimal or 0x hex; 0 is every \
                         unmarked socket's)"
                    ))
                })?;
                if rule.mark.replace(m).is_some() {
                    return Err(Usage("one `mark` per rule".into()));
                }
            }
            _ => match (&mut rule.from, netmask_len(w)) {
                // `from 10.1.0.0 255.255.0.0`.
                (Some(from), Some(len)) if !from.contains('/') => {
                    *from = format!("{from}/{len}");
                }
                _ => return Err(Usage(format!("unexpected `{w}` in a rule"))),
            },
        }
    }
    let kinds = [
        rule.from.is_some(),
        rule.iface.is_some(),
        rule.mark.is_some(),
    ];
    if kinds.iter().filter(|&&k| k).count() != 1 {
        return Err(Usage(
            "a rule matches `from PREFIX`, `iface IFACE` or `mark M`, one of the three".into(),
        ));
    }
    rule.fib = fib.ok_or_else(|| Usage("a rule needs `fib N`".into()))?;
    Ok(rule)
}

fn show(c: &Common, sockets: &[EngineSocket]) -> ExitCode {
    let answers = ask_all(sockets, &Request::Rules);
    if c.json {
        print_json(&answers);
        return exit(report_errors(&answers));
    }
    for a in &answers {
        let Ok(Reply::Rules { rules, fibs }) = &a.reply else {
            continue;
        };
        println!(
            "engine {} ({fibs} fib{}; a packet no rule matches uses fib 0):",
            a.label(),
            if *fibs == 1 { "" } else { "s" }
        );
        for r in rules {
            let what = match (&r.from, &r.iface, r.mark) {
                (Some(p), _, _) => format!("from {p}"),
                (None, Some(i), _) => format!("iface {i}"),
                (None, None, Some(m)) => format!("mark {m}"),
                (None, None, None) => "from any".into(),
            };
            println!("{:05} setfib {} {what}", r.priority, r.fib);
        }
    }
    exit(report_errors(&answers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<RuleSpec, String> {
        let words: Vec<&str> = s.split_whitespace().collect();
        parse_rule(&words).map_err(|Usage(m)| m)
    }

    #[test]
    fn rules_in_ipfw_and_ip_rule_words() {
        let r = parse("200 from 10.99.70.0/24 fib 2").unwrap();
        assert_eq!(
            (r.priority, r.from.as_deref(), r.iface, r.fib),
            (200, Some("10.99.70.0/24"), None, 2)
        );
        let r = parse("setfib 1 from 110.110.110.0 255.255.255.0").unwrap();
        assert_eq!(
            (r.priority, r.from.as_deref(), r.fib),
            (100, Some("110.110.110.0/24"), 1)
        );
        let r = parse("5 iface vlan10 table 3").unwrap();
        assert_eq!(
            (r.priority, r.iface.as_deref(), r.fib),
            (5, Some("vlan10"), 3)
        );
        let r = parse("50 mark 7 fib 2").unwrap();
        assert_eq!((r.priority, r.mark, r.from, r.fib), (50, Some(7), None, 2));
        let r = parse("fwmark 0x10 table 1").unwrap();
        assert_eq!((r.mark, r.fib), (Some(16), 1));
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (bad, says) in [
            ("from 10.0.0.0/8", "needs `fib N`"),
            ("fib 1", "one of the three"),
            ("from 10.0.0.0/8 iface port0 fib 1", "one of the three"),
            ("from 10.0.0.0/8 mark 3 fib 1", "one of the three"),
            ("mark 0 fib 1", "not a mark"),
            ("mark x fib 1", "not a mark"),
            ("mark 1 mark 2 fib 1", "one `mark`"),
            ("from 10.0.0.0/8 fib x", "not a FIB number"),
            ("from 10.0.0.0/8 fib", "needs a FIB number"),
            ("from 10.0.0.0/8 fib 1 fib 2", "one FIB"),
            (
                "from 10.0.0.0 255.0.255.0 fib 1",
                "unexpected `255.0.255.0`",
            ),
            ("from 10.0.0.0/8 to any fib 1", "unexpected `to`"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
