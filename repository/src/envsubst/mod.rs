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
//! A default that is empty (`${VAR:=}`, `${VAR=}`, `${VAR:-}`) is no default, as drone's parser
//! gives it no argument and clusterctl counts the variable as required. Text that starts a
//! form but is not one (`${`, `${VAR`, `${}`, `${1X}`, `${arr[@]}`, `${VAR+x}`, `${VAR?x}`,
//! `${NAME :=x}`) is drone's "bad substitution": the whole text fails, and the error quotes
//! the first such form and its line. `$${` is the way to write a literal `${`.

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

/// Variables that are needed and not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingVariables(pub Vec<String>);

/// A `${` that starts no form drone/envsubst can expand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSubstitution {
    /// The form as written (to the end of its line when it is not closed).
    pub form: String,
    /// 1-based.
    pub line: usize,
}

impl fmt::Display for BadSubstitution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad substitution {:?} on line {}: it is no ${{...}} form that clusterctl can expand; write $${{ for a literal ${{",
            self.form, self.line
        )
    }
}

impl std::error::Error for BadSubstitution {}

/// How deep forms may nest in one another (`${A:=${B:=...}}`): far beyond what templates
/// write, and far below what would exhaust a worker's stack.
pub const MAX_NESTING: usize = 32;

/// The most text an expansion may make (a value repeated, or replaced into every match, grows
/// a text beyond what a components file or template may hold).
pub const MAX_OUTPUT: usize = 64 << 20;

/// Why expansion failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpandError {
    Missing(MissingVariables),
    Bad(BadSubstitution),
    /// Forms nested deeper than [`MAX_NESTING`], from this line (1-based).
    TooDeep {
        line: usize,
    },
    /// The expanded text would exceed [`MAX_OUTPUT`] bytes.
    TooLarge,
}

impl fmt::Display for ExpandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpandError::Missing(m) => m.fmt(f),
            ExpandError::Bad(b) => b.fmt(f),
            ExpandError::TooDeep { line } => write!(
                f,
                "the ${{...}} forms on line {line} nest more than {MAX_NESTING} deep; write the default in fewer levels"
            ),
            ExpandError::TooLarge => write!(
                f,
                "the text would grow beyond {} MiB once its variables are expanded; check the values that are repeated or replaced into it",
                MAX_OUTPUT >> 20
            ),
        }
    }
}

impl std::error::Error for ExpandError {}

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
    Var {
        name: String,
        op: Op,
    },
    /// A bad substitution at this byte offset of the text it was parsed from (`deep`: a form
    /// nested beyond [`MAX_NESTING`]).
    Bad {
        form: String,
        offset: usize,
        deep: bool,
    },
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
    parse_at(text, 0)
}

/// [`parse`] of a text nested `depth` forms deep.
fn parse_at(text: &str, depth: usize) -> Vec<Node> {
    let bytes = text.as_bytes();
    let braces = Braces::of(bytes);
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
            Some(b'{') => {
                let (node, next) = match depth < MAX_NESTING {
                    true => parse_form(text, at + 2, depth + 1, &braces)
                        .unwrap_or_else(|| bad_form(text, at, false, &braces)),
                    false => bad_form(text, at, true, &braces),
                };
                literal.push_str(&text[from..at]);
                if !literal.is_empty() {
                    nodes.push(Node::Text(unescape(std::mem::take(&mut literal))));
                }
                nodes.push(node);
                i = next;
                from = next;
            }
            _ => i = at + 1,
        }
    }
    literal.push_str(&text[from..]);
    if !literal.is_empty() {
        nodes.push(Node::Text(unescape(literal)));
    }
    nodes
}

/// drone/envsubst's escapes in plain text: `\\` is `\` and `\/` is `/`; any other backslash
/// stays.
fn unescape(text: String) -> String {
    if !text.contains('\\') {
        return text;
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

/// Where each form of a text closes: for the body start of every `${` (just after it), the
/// index of the `}` that closes it, counting nested `${`. Found in one pass, so that a text of
/// many forms that never close (an attack, or a typo repeated) costs linear time, not a scan
/// to the end of the text for each.
struct Braces(std::collections::HashMap<usize, usize>);

impl Braces {
    fn of(bytes: &[u8]) -> Braces {
        let mut open = Vec::new();
        let mut closes = std::collections::HashMap::new();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'$' if bytes.get(i + 1) == Some(&b'{') => {
                    open.push(i + 2);
                    i += 2;
                    continue;
                }
                b'}' => {
                    if let Some(start) = open.pop() {
                        closes.insert(start, i);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        Braces(closes)
    }

    /// The index of the `}` that closes the form whose body starts at `start`.
    fn closing(&self, start: usize) -> Option<usize> {
        self.0.get(&start).copied()
    }
}

/// The bad substitution starting at `at` (its `$`): the form to its closing brace, else to the
/// end of its line; parsing goes on after it.
fn bad_form(text: &str, at: usize, deep: bool, braces: &Braces) -> (Node, usize) {
    let end = match braces.closing(at + 2) {
        Some(close) => close + 1,
        None => text[at..].find('\n').map_or(text.len(), |n| at + n),
    };
    (Node::Bad { form: text[at..end].to_string(), offset: at, deep }, end)
}

/// Parses the form whose body starts at `start` (just after `${`); returns it and the index
/// after its closing brace.
fn parse_form(text: &str, start: usize, depth: usize, braces: &Braces) -> Option<(Node, usize)> {
    let end = braces.closing(start)?;
    let body = &text[start..end];
    // clusterctl turns `${ VAR }`, `${ VAR}` and `${VAR }` into `${VAR}` before drone parses:
    // spaces are allowed around a bare name only.
    let trimmed = body.trim();
    if valid_name(trimmed) {
        return Some((Node::Var { name: trimmed.to_string(), op: Op::Value }, end + 1));
    }
    if let Some(name) = body.strip_prefix('#')
        && valid_name(name)
    {
        return Some((Node::Var { name: name.to_string(), op: Op::Length }, end + 1));
    }
    let name_len = body.bytes().take_while(|b| is_name_char(*b as char)).count();
    let name = &body[..name_len];
    if !valid_name(name) {
        return None;
    }
    let op = parse_op(&body[name_len..], depth)?;
    Some((Node::Var { name: name.to_string(), op }, end + 1))
}

fn valid_name(name: &str) -> bool {
    name.chars().next().is_some_and(is_name_start) && name.chars().all(is_name_char)
}

fn parse_op(rest: &str, depth: usize) -> Option<Op> {
    let parse = |text: &str| parse_at(text, depth);
    // `${VAR?x}` and `${VAR+x}` are bad substitutions in drone (only their `:` forms exist).
    const PREFIXES: [&str; 5] = [":=", ":-", ":?", ":+", "="];
    for prefix in PREFIXES {
        if let Some(arg) = rest.strip_prefix(prefix) {
            return Some(Op::Default(parse(arg)));
        }
    }
    type MakeOp = fn(Vec<Node>) -> Op;
    let table: [(&str, MakeOp); 13] = [
        ("##", |a| Op::TrimPrefix { longest: true, pattern: a }),
        ("#", |a| Op::TrimPrefix { longest: false, pattern: a }),
        ("%%", |a| Op::TrimSuffix { longest: true, pattern: a }),
        ("%", |a| Op::TrimSuffix { longest: false, pattern: a }),
        ("//", |a| Op::Replace { mode: ReplaceMode::All, args: a }),
        ("/#", |a| Op::Replace { mode: ReplaceMode::Prefix, args: a }),
        ("/%", |a| Op::Replace { mode: ReplaceMode::Suffix, args: a }),
        ("/", |a| Op::Replace { mode: ReplaceMode::First, args: a }),
        ("^^", |_| Op::Case { upper: true, all: true }),
        ("^", |_| Op::Case { upper: true, all: false }),
        (",,", |_| Op::Case { upper: false, all: true }),
        (",", |_| Op::Case { upper: false, all: false }),
        (":", Op::Substring),
    ];
    table.iter().find_map(|(prefix, make)| rest.strip_prefix(prefix).map(|a| make(parse(a))))
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

    /// The first bad substitution, if any (drone fails on the whole text), or forms nested
    /// too deep.
    pub fn bad_substitution(&self, text: &str) -> Option<ExpandError> {
        fn first(nodes: &[Node]) -> Option<(&str, usize, bool)> {
            nodes.iter().find_map(|node| match node {
                Node::Bad { form, offset, deep } => Some((form.as_str(), *offset, *deep)),
                Node::Var { op, .. } => {
                    op.arguments().and_then(first).map(|(form, _, deep)| (form, usize::MAX, deep))
                }
                Node::Text(_) => None,
            })
        }
        let (form, offset, deep) = first(&self.0)?;
        // A bad form inside an argument is found by its text.
        let offset = if offset == usize::MAX { text.find(form).unwrap_or(0) } else { offset };
        let line = 1 + text[..offset].matches('\n').count();
        Some(match deep {
            true => ExpandError::TooDeep { line },
            false => ExpandError::Bad(BadSubstitution { form: form.to_string(), line }),
        })
    }

    /// See [`expand`]; `text` is the text this was parsed from, for the line of an error.
    pub fn expand_text(
        &self,
        text: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<String, ExpandError> {
        if let Some(bad) = self.bad_substitution(text) {
            return Err(bad);
        }
        self.expand(lookup)
    }

    /// Expands, reporting every missing variable (bad substitutions are left as written:
    /// [`Parsed::expand_text`] refuses them first).
    fn expand(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
        let mut missing = Vec::new();
        let out = eval(&self.0, lookup, &mut missing).map_err(|TooLarge| ExpandError::TooLarge)?;
        if missing.is_empty() {
            Ok(out)
        } else {
            missing.sort();
            missing.dedup();
            Err(ExpandError::Missing(MissingVariables(missing)))
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
                // An empty default is none: the variable is required.
                Op::Default(arg) if arg.is_empty() => None,
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
            Node::Bad { form, .. } => form.clone(),
        })
        .collect()
}

/// Expands every `${...}` form of `text`, looking values up with `lookup`. Every variable that
/// is needed and has no value is reported at once.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    Parsed::new(text).expand_text(text, lookup)
}

/// An expansion that would exceed [`MAX_OUTPUT`].
struct TooLarge;

/// Appends to an expansion, within [`MAX_OUTPUT`].
fn push(out: &mut String, text: &str) -> Result<(), TooLarge> {
    if out.len() + text.len() > MAX_OUTPUT {
        return Err(TooLarge);
    }
    out.push_str(text);
    Ok(())
}

fn eval(
    nodes: &[Node],
    lookup: &dyn Fn(&str) -> Option<String>,
    missing: &mut Vec<String>,
) -> Result<String, TooLarge> {
    // Room for the text around the forms: a release's megabyte grown by doubling would be held
    // twice, and for a moment three times, while it grows.
    let literal: usize = nodes.iter().map(|n| if let Node::Text(t) = n { t.len() } else { 0 }).sum();
    let mut out = String::with_capacity(literal.min(MAX_OUTPUT));
    for node in nodes {
        match node {
            Node::Text(t) => push(&mut out, t)?,
            Node::Bad { form, .. } => push(&mut out, form)?,
            Node::Var { name, op } => {
                let value = lookup(name);
                match op {
                    // No argument, no default: `${VAR:=}` needs VAR (set and empty is fine).
                    Op::Default(arg) if arg.is_empty() => match value {
                        None => missing.push(name.clone()),
                        Some(v) => push(&mut out, &v)?,
                    },
                    // Variables inside a default are neither required nor listed: unset, they
                    // read as empty.
                    Op::Default(arg) => match value.filter(|v| !v.is_empty()) {
                        Some(v) => push(&mut out, &v)?,
                        None => push(&mut out, &eval(arg, lookup, &mut Vec::new())?)?,
                    },
                    // Any argument counts as a default: an unset variable reads as empty.
                    Op::Substring(_) | Op::TrimPrefix { .. } | Op::TrimSuffix { .. } | Op::Replace { .. } => {
                        push(&mut out, &apply(op, &value.unwrap_or_default(), lookup)?)?
                    }
                    _ => match value {
                        None => missing.push(name.clone()),
                        Some(v) => push(&mut out, &apply(op, &v, lookup)?)?,
                    },
                }
            }
        }
    }
    Ok(out)
}

impl Op {
    /// The nodes of its argument, if it has one.
    fn arguments(&self) -> Option<&[Node]> {
        match self {
            Op::Default(a) | Op::Substring(a) => Some(a),
            Op::TrimPrefix { pattern, .. } | Op::TrimSuffix { pattern, .. } => Some(pattern),
            Op::Replace { args, .. } => Some(args),
            Op::Value | Op::Length | Op::Case { .. } => None,
        }
    }
}

fn apply(op: &Op, value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, TooLarge> {
    // Variables inside arguments are not required either.
    let arg = |nodes: &Vec<Node>| eval(nodes, lookup, &mut Vec::new());
    Ok(match op {
        Op::Value | Op::Default(_) => value.to_string(),
        // Go counts bytes.
        Op::Length => value.len().to_string(),
        Op::Substring(args) => substring(value, &arg(args)?),
        Op::TrimPrefix { longest, pattern } => trim_prefix(value, &arg(pattern)?, *longest),
        Op::TrimSuffix { longest, pattern } => trim_suffix(value, &arg(pattern)?, *longest),
        Op::Replace { mode, args } => {
            let text = arg(args)?;
            let (pattern, replacement) = text.split_once('/').unwrap_or((text.as_str(), ""));
            // Every match replaced: the size is known before the text is made.
            if *mode == ReplaceMode::All && !pattern.is_empty() && replacement.len() > pattern.len() {
                let grows = value.matches(pattern).count().saturating_mul(replacement.len() - pattern.len());
                if value.len().saturating_add(grows) > MAX_OUTPUT {
                    return Err(TooLarge);
                }
            }
            replace(value, pattern, replacement, *mode)
        }
        Op::Case { upper, all } => change_case(value, *upper, *all),
    })
}

#[cfg(test)]
mod tests;
