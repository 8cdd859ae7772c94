//! Variable expansion compatible with drone/envsubst, which clusterctl uses, restricted as
//! clusterctl's templates need: only `${...}` forms are expanded (a bare `$VAR` is left alone,
//! templates carry shell scripts), `$$` is a literal `$`, `\\` and `\/` in plain text are `\` and
//! `/` (other backslashes stay), and values are inserted verbatim even when they contain `$`.
//! Names may contain `-` (`${VAR-d}` is the variable `VAR-d`). As clusterctl reads drone's
//! forms: any argument counts as a default (`${VAR#p}`, `${VAR/a/b}`, `${VAR:1}` with VAR unset are empty); variables
//! inside defaults and arguments are neither required nor listed; lengths and substrings count
//! bytes.
//!
//! | form | meaning |
//! | --- | --- |
//! | `${VAR}`, `${ VAR }` | the value |
//! | `${VAR:=d}`, `${VAR=d}`, `${VAR:-d}` | the value, or `d` when unset or empty (`d` may hold variables) |
//! | `${#VAR}` | the length of the value, in bytes |
//! | `${VAR:pos}`, `${VAR:pos:len}` | a substring (a negative `pos` counts from the end) |
//! | `${VAR#p}`, `${VAR##p}` | the value without the shortest / longest prefix matching the glob `p` |
//! | `${VAR%p}`, `${VAR%%p}` | the value without the shortest / longest suffix matching the glob `p` |
//! | `${VAR/p/r}`, `${VAR//p/r}` | the first / every `p` replaced by `r` |
//! | `${VAR/#p/r}`, `${VAR/%p/r}` | `p` replaced by `r` at the start / end |
//! | `${VAR^}`, `${VAR^^}`, `${VAR,}`, `${VAR,,}` | first / every character upper or lower case |
//!
//! Text that looks like a `${...}` form but is not one (no closing brace, a name that is not
//! `[A-Za-z_][A-Za-z0-9_]*`) is left as it is.

use std::collections::BTreeMap;
use std::fmt;

mod operations;

use operations::{change_case, replace, substring, trim_prefix, trim_suffix};

/// One variable a text uses, with its default when it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableUse {
    pub name: String,
    pub default: Option<String>,
}

/// Why expansion failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingVariables(pub Vec<String>);

/// Where clusterctl (and `butlerctl`) take variables from.
pub const CLUSTERCTL_VARIABLES: &str = "in the environment or in the clusterctl config file";

impl MissingVariables {
    /// The message, saying where to set them (`in the environment or ...`).
    pub fn message(&self, place: &str) -> String {
        let (noun, verb, pronoun) =
            if self.0.len() == 1 { ("variable", "is", "it") } else { ("variables", "are", "them") };
        format!("the {noun} {} {verb} not set; set {pronoun} {place}", self.0.join(", "))
    }
}

impl fmt::Display for MissingVariables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(CLUSTERCTL_VARIABLES))
    }
}

impl std::error::Error for MissingVariables {}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Var { name: String, op: Op },
}

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Value,
    Default(Vec<Node>),
    Length,
    Substring(Vec<Node>),
    TrimPrefix { longest: bool, pattern: Vec<Node> },
    TrimSuffix { longest: bool, pattern: Vec<Node> },
    Replace { mode: ReplaceMode, args: Vec<Node> },
    Case { upper: bool, all: bool },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ReplaceMode {
    First,
    All,
    Prefix,
    Suffix,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// drone/envsubst's identifiers take `-` too: `${VAR-d}` is the variable `VAR-d`, not a default.
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Parses `text` into literal text and variable forms. Never fails: what is not a form is text.
/// Only `$`, `{` and `}` matter, all ASCII, so the text is scanned as bytes.
fn parse(text: &str) -> Vec<Node> {
    let bytes = text.as_bytes();
    let mut nodes = Vec::new();
    let mut literal = String::new();
    let (mut from, mut i) = (0, 0);
    while let Some(offset) = bytes[i..].iter().position(|b| *b == b'$') {
        let at = i + offset;
        match bytes.get(at + 1) {
            Some(b'$') => {
                literal.push_str(&text[from..at]);
                literal.push('$');
                i = at + 2;
                from = i;
            }
            Some(b'{') => match parse_form(text, at + 2) {
                Some((node, next)) => {
                    literal.push_str(&text[from..at]);
                    if !literal.is_empty() {
                        nodes.push(Node::Text(unescape(&std::mem::take(&mut literal))));
                    }
                    nodes.push(node);
                    i = next;
                    from = next;
                }
                None => i = at + 1,
            },
            _ => i = at + 1,
        }
    }
    literal.push_str(&text[from..]);
    if !literal.is_empty() {
        nodes.push(Node::Text(unescape(&literal)));
    }
    nodes
}

/// drone/envsubst's escapes in plain text: `\\` is `\` and `\/` is `/`; any other backslash
/// stays.
fn unescape(text: &str) -> String {
    if !text.contains('\\') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some('\\')) | ('\\', Some('/')) => out.push(chars.next().expect("peeked")),
            _ => out.push(c),
        }
    }
    out
}

/// The index of the `}` that closes the form whose body starts at `start`, counting nested
/// `${`.
fn closing_brace(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0;
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                depth += 1;
                i += 2;
                continue;
            }
            b'}' if depth == 0 => return Some(i),
            b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

/// Parses the form whose body starts at `start` (just after `${`); returns it and the index
/// after its closing brace.
fn parse_form(text: &str, start: usize) -> Option<(Node, usize)> {
    let end = closing_brace(text.as_bytes(), start)?;
    let trimmed = text[start..end].trim();
    if let Some(name) = trimmed.strip_prefix('#')
        && valid_name(name)
    {
        return Some((Node::Var { name: name.to_string(), op: Op::Length }, end + 1));
    }
    let name_len = trimmed.bytes().take_while(|b| is_name_char(*b as char)).count();
    let name = &trimmed[..name_len];
    if !valid_name(name) {
        return None;
    }
    let rest = trimmed[name_len..].trim_start();
    let op = if rest.is_empty() { Op::Value } else { parse_op(rest)? };
    Some((Node::Var { name: name.to_string(), op }, end + 1))
}

fn valid_name(name: &str) -> bool {
    name.chars().next().is_some_and(is_name_start) && name.chars().all(is_name_char)
}

fn parse_op(rest: &str) -> Option<Op> {
    const PREFIXES: [&str; 7] = [":=", ":-", ":?", ":+", "=", "?", "+"];
    for prefix in PREFIXES {
        if let Some(arg) = rest.strip_prefix(prefix) {
            return Some(Op::Default(parse(arg)));
        }
    }
    type MakeOp = fn(&str) -> Op;
    let table: [(&str, MakeOp); 13] = [
        ("##", |a| Op::TrimPrefix { longest: true, pattern: parse(a) }),
        ("#", |a| Op::TrimPrefix { longest: false, pattern: parse(a) }),
        ("%%", |a| Op::TrimSuffix { longest: true, pattern: parse(a) }),
        ("%", |a| Op::TrimSuffix { longest: false, pattern: parse(a) }),
        ("//", |a| Op::Replace { mode: ReplaceMode::All, args: parse(a) }),
        ("/#", |a| Op::Replace { mode: ReplaceMode::Prefix, args: parse(a) }),
        ("/%", |a| Op::Replace { mode: ReplaceMode::Suffix, args: parse(a) }),
        ("/", |a| Op::Replace { mode: ReplaceMode::First, args: parse(a) }),
        ("^^", |_| Op::Case { upper: true, all: true }),
        ("^", |_| Op::Case { upper: true, all: false }),
        (",,", |_| Op::Case { upper: false, all: true }),
        (",", |_| Op::Case { upper: false, all: false }),
        (":", |a| Op::Substring(parse(a))),
    ];
    table.iter().find_map(|(prefix, make)| rest.strip_prefix(prefix).map(make))
}

/// A text parsed once for both listing its variables and expanding them.
pub struct Parsed(Vec<Node>);

impl Parsed {
    pub fn new(text: &str) -> Parsed {
        Parsed(parse(text))
    }

    /// See [`list_variables`].
    pub fn variables(&self) -> Vec<VariableUse> {
        variables_of(&self.0)
    }

    /// See [`expand`].
    pub fn expand(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, MissingVariables> {
        let mut missing = Vec::new();
        let out = eval(&self.0, lookup, &mut missing);
        if missing.is_empty() {
            Ok(out)
        } else {
            missing.sort();
            missing.dedup();
            Err(MissingVariables(missing))
        }
    }
}

/// The variables `text` uses, sorted and de-duplicated, each with its default if any (a
/// variable used both with and without a default keeps its default).
pub fn list_variables(text: &str) -> Vec<VariableUse> {
    variables_of(&parse(text))
}

fn variables_of(nodes: &[Node]) -> Vec<VariableUse> {
    fn walk(nodes: &[Node], found: &mut BTreeMap<String, Option<String>>) {
        // Only the top level: variables inside defaults and arguments are not listed.
        for node in nodes {
            let Node::Var { name, op } = node else { continue };
            let default = match op {
                Op::Default(arg) => Some(render_literal(arg)),
                Op::Substring(arg) => Some(render_literal(arg)),
                Op::TrimPrefix { pattern, .. } | Op::TrimSuffix { pattern, .. } => {
                    Some(render_literal(pattern))
                }
                Op::Replace { args, .. } => Some(render_literal(args)),
                _ => None,
            };
            let entry = found.entry(name.clone()).or_insert(None);
            if entry.is_none() {
                *entry = default;
            }
        }
    }
    let mut found = BTreeMap::new();
    walk(nodes, &mut found);
    found.into_iter().map(|(name, default)| VariableUse { name, default }).collect()
}

/// A default as written (variables inside it shown as `${NAME}`).
fn render_literal(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| match n {
            Node::Text(t) => t.clone(),
            Node::Var { name, .. } => format!("${{{name}}}"),
        })
        .collect()
}

/// Expands every `${...}` form of `text`, looking values up with `lookup`. Every variable that
/// is needed and has no value is reported at once.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, MissingVariables> {
    Parsed::new(text).expand(lookup)
}

fn eval(nodes: &[Node], lookup: &dyn Fn(&str) -> Option<String>, missing: &mut Vec<String>) -> String {
    let mut out = String::new();
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Var { name, op } => {
                let value = lookup(name);
                match op {
                    // Variables inside a default are neither required nor listed: unset, they
                    // read as empty.
                    Op::Default(arg) => match value.filter(|v| !v.is_empty()) {
                        Some(v) => out.push_str(&v),
                        None => out.push_str(&eval(arg, lookup, &mut Vec::new())),
                    },
                    // Any argument counts as a default: an unset variable reads as empty.
                    Op::Substring(_) | Op::TrimPrefix { .. } | Op::TrimSuffix { .. } | Op::Replace { .. } => {
                        out.push_str(&apply(op, &value.unwrap_or_default(), lookup))
                    }
                    _ => match value {
                        None => missing.push(name.clone()),
                        Some(v) => out.push_str(&apply(op, &v, lookup)),
                    },
                }
            }
        }
    }
    out
}

fn apply(op: &Op, value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    // Variables inside arguments are not required either.
    let arg = |nodes: &Vec<Node>| eval(nodes, lookup, &mut Vec::new());
    match op {
        Op::Value | Op::Default(_) => value.to_string(),
        // Go counts bytes.
        Op::Length => value.len().to_string(),
        Op::Substring(args) => substring(value, &arg(args)),
        Op::TrimPrefix { longest, pattern } => trim_prefix(value, &arg(pattern), *longest),
        Op::TrimSuffix { longest, pattern } => trim_suffix(value, &arg(pattern), *longest),
        Op::Replace { mode, args } => {
            let text = arg(args);
            let (pattern, replacement) = text.split_once('/').unwrap_or((text.as_str(), ""));
            replace(value, pattern, replacement, *mode)
        }
        Op::Case { upper, all } => change_case(value, *upper, *all),
    }
}

#[cfg(test)]
mod tests;
