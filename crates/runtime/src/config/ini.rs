//! The INI layer: F-Stack's `config.ini` syntax, before any meaning.
//!
//! - `[section]` headers; a section may appear twice (its keys are merged).
//! - `key=value`, spaces around `=` allowed; the value is everything after
//!   the first `=`, trimmed. Values may contain `;` and `#` (F-Stack's
//!   `vip_addr=a;b;c`), so only whole lines are comments.
//! - Comments: lines whose first non-blank character is `;` or `#`.
//! - Keys and section names are case-sensitive, as in F-Stack.
//! - A key twice in one section is an error.

use std::fmt;

/// Where a value came from: a line of the file, or a command-line override.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    Line(usize),
    Override,
}

/// One `key=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: String,
    pub value: String,
    pub origin: Origin,
}

/// One section with its keys in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Section {
    pub name: String,
    pub origin: Origin,
    pub entries: Vec<Entry>,
}

/// A parsed file: its sections in order of first appearance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Document {
    pub sections: Vec<Section>,
}

/// A syntax error: the line and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub line: usize,
    pub reason: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl Document {
    /// Parses the text of a file.
    pub fn parse(text: &str) -> Result<Document, SyntaxError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut doc = Document::default();
        // Index into doc.sections of the section being filled.
        let mut current: Option<usize> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with(';') || trimmed.starts_with('#') {
                continue;
            }
            if let Some(rest) = trimmed.strip_prefix('[') {
                let Some(end) = rest.find(']') else {
                    return Err(SyntaxError {
                        line,
                        reason: format!("section header {trimmed:?} has no closing ']'"),
                    });
                };
                let name = rest[..end].trim();
                let after = rest[end + 1..].trim();
                if !after.is_empty() {
                    return Err(SyntaxError {
                        line,
                        reason: format!(
                            "unexpected text {after:?} after section header [{name}] \
                             (comments must be on their own line)"
                        ),
                    });
                }
                if name.is_empty() {
                    return Err(SyntaxError {
                        line,
                        reason: "empty section name []".to_string(),
                    });
                }
                if let Some(bad) = name.chars().find(|c| c.is_whitespace() || *c == '[') {
                    return Err(SyntaxError {
                        line,
                        reason: format!("section name [{name}] contains {bad:?}"),
                    });
                }
                current = Some(doc.section_index_or_insert(name, Origin::Line(line)));
                continue;
            }
            let Some(eq) = trimmed.find('=') else {
                return Err(SyntaxError {
                    line,
                    reason: format!(
                        "expected \"key=value\", \"[section]\" or a comment, found {trimmed:?}"
                    ),
                });
            };
            let key = trimmed[..eq].trim();
            let value = trimmed[eq + 1..].trim();
            if key.is_empty() {
                return Err(SyntaxError {
                    line,
                    reason: format!("missing key before '=' in {trimmed:?}"),
                });
            }
            if let Some(bad) = key.chars().find(|c| c.is_whitespace()) {
                return Err(SyntaxError {
                    line,
                    reason: format!("key {key:?} contains {bad:?}"),
                });
            }
            let Some(idx) = current else {
                return Err(SyntaxError {
                    line,
                    reason: format!("key {key:?} is outside of any [section]"),
                });
            };
            let section = &mut doc.sections[idx];
            if let Some(prev) = section.entries.iter().find(|e| e.key == key) {
                let first = match prev.origin {
                    Origin::Line(l) => format!(" (first set on line {l})"),
                    Origin::Override => String::new(),
                };
                return Err(SyntaxError {
                    line,
                    reason: format!("[{}] {key} is set twice{first}", section.name),
                });
            }
            section.entries.push(Entry {
                key: key.to_string(),
                value: value.to_string(),
                origin: Origin::Line(line),
            });
        }
        Ok(doc)
    }

    fn section_index_or_insert(&mut self, name: &str, origin: Origin) -> usize {
        if let Some(i) = self.sections.iter().position(|s| s.name == name) {
            return i;
        }
        self.sections.push(Section {
            name: name.to_string(),
            origin,
            entries: Vec::new(),
        });
        self.sections.len() - 1
    }

    /// Sets `key` in `section` to `value` as a command-line override: the
    /// file's value, if any, is replaced; a missing section is created.
    pub fn set_override(&mut self, section: &str, key: &str, value: &str) {
        let idx = self.section_index_or_insert(section, Origin::Override);
        let sec = &mut self.sections[idx];
        if let Some(e) = sec.entries.iter_mut().find(|e| e.key == key) {
            e.value = value.to_string();
            e.origin = Origin::Override;
        } else {
            sec.entries.push(Entry {
                key: key.to_string(),
                value: value.to_string(),
                origin: Origin::Override,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_keys_comments() {
        let doc = Document::parse(
            "; top comment\n# another\n\n[dpdk]\nlcore_mask = 0x3\n  channel=4  \n\
             [port0]\nvip_addr=10.0.0.1;10.0.0.2\nempty=\n",
        )
        .unwrap();
        assert_eq!(doc.sections.len(), 2);
        let dpdk = &doc.sections[0];
        assert_eq!(dpdk.name, "dpdk");
        assert_eq!(dpdk.origin, Origin::Line(4));
        assert_eq!(dpdk.entries[0].key, "lcore_mask");
        assert_eq!(dpdk.entries[0].value, "0x3");
        assert_eq!(dpdk.entries[0].origin, Origin::Line(5));
        assert_eq!(dpdk.entries[1].value, "4");
        let port = &doc.sections[1];
        assert_eq!(port.entries[0].value, "10.0.0.1;10.0.0.2");
        assert_eq!(port.entries[1].value, "");
    }

    #[test]
    fn repeated_section_merges() {
        let doc = Document::parse("[a]\nx=1\n[b]\ny=2\n[a]\nz=3\n").unwrap();
        assert_eq!(doc.sections.len(), 2);
        assert_eq!(doc.sections[0].entries.len(), 2);
        let err = Document::parse("[a]\nx=1\n[b]\n[a]\nx=2\n").unwrap_err();
        assert_eq!(err.line, 5);
        assert_eq!(err.reason, "[a] x is set twice (first set on line 2)");
    }

    #[test]
    fn syntax_errors() {
        let e = Document::parse("x=1\n").unwrap_err();
        assert_eq!(
            (e.line, e.reason.as_str()),
            (1, "key \"x\" is outside of any [section]")
        );
        let e = Document::parse("[a]\n[b\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("no closing ']'"), "{e}");
        let e = Document::parse("[a]\njunk\n").unwrap_err();
        assert_eq!(
            e.reason,
            "expected \"key=value\", \"[section]\" or a comment, found \"junk\""
        );
        let e = Document::parse("[a] ; note\n").unwrap_err();
        assert!(
            e.reason.contains("comments must be on their own line"),
            "{e}"
        );
        let e = Document::parse("[]\n").unwrap_err();
        assert_eq!(e.reason, "empty section name []");
        let e = Document::parse("[a]\n=1\n").unwrap_err();
        assert!(e.reason.starts_with("missing key"), "{e}");
        let e = Document::parse("[a]\nmy key=1\n").unwrap_err();
        assert!(e.reason.contains("contains ' '"), "{e}");
    }

    #[test]
    fn bom_and_crlf() {
        let doc = Document::parse("\u{feff}[a]\r\nx = 1\r\n").unwrap();
        assert_eq!(doc.sections[0].entries[0].value, "1");
    }

    #[test]
    fn override_replaces_or_appends() {
        let mut doc = Document::parse("[a]\nx=1\n").unwrap();
        doc.set_override("a", "x", "2");
        doc.set_override("a", "y", "3");
        doc.set_override("b", "z", "4");
        assert_eq!(doc.sections[0].entries[0].value, "2");
        assert_eq!(doc.sections[0].entries[0].origin, Origin::Override);
        assert_eq!(doc.sections[0].entries[1].key, "y");
        assert_eq!(doc.sections[1].name, "b");
        assert_eq!(doc.sections[1].origin, Origin::Override);
    }
}
