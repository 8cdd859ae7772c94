//! Variable expansion compatible with drone/envsubst, which clusterctl uses, restricted as
//! clusterctl's templates need: only `${...}` forms are expanded (a bare `$VAR` is left alone,
//! templates carry shell scripts), `$$` is a literal `$`, backslashes are left alone, and values
//! are inserted verbatim even when they contain `$`.
//!
//! | form | meaning |
//! | --- | --- |
//! | `${VAR}`, `${ VAR }` | the value |
//! | `${VAR:=d}`, `${VAR=d}`, `${VAR:-d}`, `${VAR-d}` | the value, or `d` when unset or empty (`d` may hold variables) |
//! | `${#VAR}` | the length of the value, in characters |
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

/// One variable a text uses, with its default when it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableUse {
    pub name: String,
    pub default: Option<String>,
}

/// Why expansion failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingVariables(pub Vec<String>);

impl fmt::Display for MissingVariables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (noun, verb) = if self.0.len() == 1 { ("variable", "is") } else { ("variables", "are") };
        write!(
            f,
            "the {noun} {} {verb} not set; set them as environment variables or in the clusterctl config file",
            self.0.join(", ")
        )
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

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
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
                        nodes.push(Node::Text(std::mem::take(&mut literal)));
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
        nodes.push(Node::Text(literal));
    }
    nodes
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
    const PREFIXES: [&str; 8] = [":=", ":-", ":?", ":+", "=", "-", "?", "+"];
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
        for node in nodes {
            let Node::Var { name, op } = node else { continue };
            let default = match op {
                Op::Default(arg) => Some(render_literal(arg)),
                _ => None,
            };
            let entry = found.entry(name.clone()).or_insert(None);
            if entry.is_none() {
                *entry = default;
            }
            match op {
                Op::Default(arg) | Op::Substring(arg) => walk(arg, found),
                Op::TrimPrefix { pattern, .. } | Op::TrimSuffix { pattern, .. } => walk(pattern, found),
                Op::Replace { args, .. } => walk(args, found),
                _ => {}
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
                    Op::Default(arg) => match value.filter(|v| !v.is_empty()) {
                        Some(v) => out.push_str(&v),
                        None => out.push_str(&eval(arg, lookup, missing)),
                    },
                    _ => match value {
                        None => missing.push(name.clone()),
                        Some(v) => out.push_str(&apply(op, &v, lookup, missing)),
                    },
                }
            }
        }
    }
    out
}

fn apply(op: &Op, value: &str, lookup: &dyn Fn(&str) -> Option<String>, missing: &mut Vec<String>) -> String {
    let mut arg = |nodes: &Vec<Node>| eval(nodes, lookup, missing);
    match op {
        Op::Value | Op::Default(_) => value.to_string(),
        Op::Length => value.chars().count().to_string(),
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

fn substring(value: &str, args: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    let (pos, len) = args.split_once(':').map_or((args, None), |(p, l)| (p, Some(l)));
    let Ok(pos) = pos.trim().parse::<i64>() else { return value.to_string() };
    let n = chars.len() as i64;
    let start = if pos < 0 { (n + pos).max(0) } else { pos.min(n) } as usize;
    let end = match len.map(|l| l.trim().parse::<i64>()) {
        None => chars.len(),
        Some(Ok(l)) if l >= 0 => (start as i64 + l).min(n) as usize,
        Some(Ok(l)) => (n + l).max(start as i64) as usize,
        Some(Err(_)) => return value.to_string(),
    };
    chars[start..end].iter().collect()
}

/// Shell glob matching (`*`, `?`, `[...]`, `\\x`), as drone/envsubst uses Go's `path.Match`.
/// Iterative, backing up to the last `*`: time is at most pattern length times text length,
/// whatever the pattern (a recursive matcher is exponential in the number of `*`).
fn glob(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut last_star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            if pattern[p] == '*' {
                last_star = Some((p + 1, t));
                p += 1;
                continue;
            }
            if let Some(used) = match_one(pattern, p, text[t]) {
                p += used;
                t += 1;
                continue;
            }
        }
        match last_star {
            Some((after_star, start)) => {
                p = after_star;
                t = start + 1;
                last_star = Some((after_star, start + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

/// Whether the pattern element at `p` matches `c`, and how many pattern characters it takes.
fn match_one(pattern: &[char], p: usize, c: char) -> Option<usize> {
    match pattern[p] {
        '?' => Some(1),
        '\\' if p + 1 < pattern.len() => (pattern[p + 1] == c).then_some(2),
        '[' => {
            let Some(close) = pattern[p + 1..].iter().position(|x| *x == ']') else {
                return (c == '[').then_some(1);
            };
            let class = &pattern[p + 1..p + 1 + close];
            let (negate, set) = match class.split_first() {
                Some(('^' | '!', set)) => (true, set),
                _ => (false, class),
            };
            let mut matched = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == '-' {
                    matched |= (set[i]..=set[i + 2]).contains(&c);
                    i += 3;
                } else {
                    matched |= set[i] == c;
                    i += 1;
                }
            }
            (matched != negate).then_some(close + 2)
        }
        literal => (literal == c).then_some(1),
    }
}

fn trim_prefix(value: &str, pattern: &str, longest: bool) -> String {
    let chars: Vec<char> = value.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    let mut lengths: Vec<usize> = (0..=chars.len()).collect();
    if longest {
        lengths.reverse();
    }
    match lengths.into_iter().find(|l| glob(&pattern, &chars[..*l])) {
        Some(l) => chars[l..].iter().collect(),
        None => value.to_string(),
    }
}

fn trim_suffix(value: &str, pattern: &str, longest: bool) -> String {
    let chars: Vec<char> = value.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    let mut starts: Vec<usize> = (0..=chars.len()).rev().collect();
    if longest {
        starts.reverse();
    }
    match starts.into_iter().find(|s| glob(&pattern, &chars[*s..])) {
        Some(s) => chars[..s].iter().collect(),
        None => value.to_string(),
    }
}

fn replace(value: &str, pattern: &str, replacement: &str, mode: ReplaceMode) -> String {
    if pattern.is_empty() {
        return value.to_string();
    }
    match mode {
        ReplaceMode::First => value.replacen(pattern, replacement, 1),
        ReplaceMode::All => value.replace(pattern, replacement),
        ReplaceMode::Prefix => match value.strip_prefix(pattern) {
            Some(rest) => format!("{replacement}{rest}"),
            None => value.to_string(),
        },
        ReplaceMode::Suffix => match value.strip_suffix(pattern) {
            Some(rest) => format!("{rest}{replacement}"),
            None => value.to_string(),
        },
    }
}

fn change_case(value: &str, upper: bool, all: bool) -> String {
    let convert =
        |c: char| -> String { if upper { c.to_uppercase().collect() } else { c.to_lowercase().collect() } };
    if all {
        return value.chars().map(convert).collect();
    }
    let mut chars = value.chars();
    match chars.next() {
        Some(first) => convert(first) + chars.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "NAME" => Some("my-cluster".into()),
            "EMPTY" => Some(String::new()),
            "B" => Some("bee".into()),
            "PATH_V" => Some("/usr/local/bin/tool".into()),
            "DOLLAR" => Some("a$b${C}".into()),
            "MIXED" => Some("hello World".into()),
            _ => None,
        }
    }

    fn run(text: &str) -> String {
        match expand(text, &env) {
            Ok(out) => out,
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn every_form_of_drone_envsubst() {
        let cases = [
            ("${NAME}", "my-cluster"),
            ("${ NAME }", "my-cluster"),
            ("x-${NAME}-y", "x-my-cluster-y"),
            ("${UNSET:=dflt}", "dflt"),
            ("${UNSET=dflt}", "dflt"),
            ("${UNSET:-dflt}", "dflt"),
            ("${UNSET-dflt}", "dflt"),
            ("${EMPTY:=dflt}", "dflt"),
            ("${EMPTY=dflt}", "dflt"),
            ("${EMPTY:-dflt}", "dflt"),
            ("${NAME:=dflt}", "my-cluster"),
            ("${UNSET:=x${B}y}", "xbeey"),
            ("${UNSET:=}", ""),
            ("${EMPTY}", ""),
            ("${#NAME}", "10"),
            ("${NAME:3}", "cluster"),
            ("${NAME:0:2}", "my"),
            ("${NAME:-7}", "my-cluster"), // `:-` is the default form, as in bash
            ("${NAME: -7}", "cluster"),
            ("${PATH_V#*/}", "usr/local/bin/tool"),
            ("${PATH_V##*/}", "tool"),
            ("${PATH_V%/*}", "/usr/local/bin"),
            ("${PATH_V%%/*}", ""),
            ("${NAME/-/_}", "my_cluster"),
            ("${NAME//-/}", "mycluster"),
            ("${PATH_V//l/L}", "/usr/LocaL/bin/tooL"),
            ("${NAME/#my/your}", "your-cluster"),
            ("${NAME/%cluster/pool}", "my-pool"),
            ("${MIXED^}", "Hello World"),
            ("${MIXED^^}", "HELLO WORLD"),
            ("${MIXED,}", "hello World"),
            ("${MIXED,,}", "hello world"),
            ("$$", "$"),
            ("$${NAME}", "${NAME}"),
            ("$NAME and $HOME", "$NAME and $HOME"),
            ("a\\b \\${NAME}", "a\\b \\my-cluster"),
            ("${DOLLAR}", "a$b${C}"),
            ("${", "${"),
            ("${NAME", "${NAME"),
            ("${1BAD}", "${1BAD}"),
            ("${arr[@]}", "${arr[@]}"),
            ("echo ${#arr[@]}", "echo ${#arr[@]}"),
            (
                "${UNSET}",
                "error: the variable UNSET is not set; set them as environment variables or in the clusterctl config file",
            ),
            (
                "${Z} ${A} ${Z}",
                "error: the variables A, Z are not set; set them as environment variables or in the clusterctl config file",
            ),
            (
                "${UNSET:=${ALSO_UNSET}}",
                "error: the variable ALSO_UNSET is not set; set them as environment variables or in the clusterctl config file",
            ),
            ("${NAME:=${ALSO_UNSET}}", "my-cluster"),
        ];
        for (text, expect) in cases {
            assert_eq!(run(text), expect, "{text}");
        }
    }

    #[test]
    fn variables_are_listed_sorted_with_their_defaults() {
        let text = "${B} ${A:=1} ${C:-x${D}y} ${A} ${#E} $NOT ${ F }";
        let listed: Vec<(String, Option<String>)> =
            list_variables(text).into_iter().map(|v| (v.name, v.default)).collect();
        let want =
            [("A", Some("1")), ("B", None), ("C", Some("x${D}y")), ("D", None), ("E", None), ("F", None)];
        assert_eq!(listed, want.map(|(n, d)| (n.to_string(), d.map(String::from))));
    }

    #[test]
    fn globs_match_like_path_match() {
        let m = |p: &str, t: &str| glob(&p.chars().collect::<Vec<_>>(), &t.chars().collect::<Vec<_>>());
        assert!(m("*", "anything"));
        assert!(m("a?c", "abc"));
        assert!(m("[a-c]x", "bx"));
        assert!(!m("[!a-c]x", "bx"));
        assert!(m("v[0-9]*", "v1.2"));
        assert!(!m("a", "ab"));
        assert!(m("*a*b*c", "xxaxxbxxc"));
        assert!(!m("*a*b*c", "xxaxxbxx"));
        assert!(m("\\*x", "*x"));
        assert!(m("[", "["));
        // Many stars against a long text that does not match: no exponential backtracking.
        let stars: String = "*".repeat(200) + "z";
        assert!(!m(&stars, &"a".repeat(2000)));
    }
}
