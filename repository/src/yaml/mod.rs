//! YAML documents for processing: splitting a multi-document text, and [`Document`], which
//! parses a large document only where it is read or changed.
//!
//! A components file is mostly CustomResourceDefinition schemas that processing never touches,
//! and parsing YAML costs tens of nanoseconds a byte. A document larger than
//! [`OUTLINE_THRESHOLD`] written in plain block style is therefore kept as text with an outline
//! of its top-level entries (and of the entries of `spec`): an entry is parsed when it is read
//! and re-serialized only when it is replaced; everything else is copied through verbatim.
//! Smaller documents, and any document with anchors, aliases, tags, flow style or document
//! markers inside, are parsed whole.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::{Map, Value};

/// The most documents a components file or template may hold (Butler's largest holds a few
/// dozen; millions of tiny ones would cost memory and time beyond any use).
pub const MAX_DOCUMENTS: usize = 10_000;

/// Refuses a text of more than [`MAX_DOCUMENTS`] documents.
pub fn check_count<T>(documents: &[T]) -> Result<(), String> {
    match documents.len() {
        n if n > MAX_DOCUMENTS => {
            Err(format!("it holds {n} YAML documents, more than the {MAX_DOCUMENTS} one may"))
        }
        _ => Ok(()),
    }
}

/// The most nodes (mappings, sequences and scalars) a components file or template may hold
/// in all its documents. Each costs tens of bytes once decoded, and a few KiB of gzipped
/// `[0,0,…]` spread over many documents would otherwise decode to gigabytes; the largest
/// providers' components (Cluster API's core: about 200,000) stay far below it.
pub const MAX_FILE_NODES: usize = 1_500_000;

/// The most bytes a components file or template may hold, its variables expanded (Cluster API's
/// core is about 2.5 MiB).
pub const MAX_FILE_BYTES: usize = 32 << 20;

/// Counts the nodes of a file's documents as they are parsed, refusing the file once they pass
/// [`MAX_FILE_NODES`]: the budget of a whole file, not of each document.
#[derive(Debug, Default)]
pub struct NodeBudget {
    spent: usize,
}

impl NodeBudget {
    /// Adds a parsed document's nodes; an error once the file holds too many.
    pub fn spend(&mut self, document: &Document) -> Result<(), String> {
        self.spent += document.nodes();
        match self.spent {
            n if n > MAX_FILE_NODES => Err(format!(
                "its documents hold more than {MAX_FILE_NODES} YAML nodes (mappings, sequences and scalars), more than any provider's components need"
            )),
            _ => Ok(()),
        }
    }
}

/// Refuses a text of more than [`MAX_FILE_BYTES`].
pub fn check_size(text: &str) -> Result<(), String> {
    match text.len() {
        n if n > MAX_FILE_BYTES => {
            Err(format!("it holds {n} bytes, more than the {MAX_FILE_BYTES} a components file may"))
        }
        _ => Ok(()),
    }
}

/// The nodes of a value: itself and everything it holds.
fn count_nodes(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(map) => map.values().map(|v| 1 + count_nodes(v)).sum(),
        _ => 0,
    }
}

/// Documents at least this large are outlined instead of parsed whole.
pub const OUTLINE_THRESHOLD: usize = 16 * 1024;

/// The non-empty documents of a multi-document YAML text, in order. A document starts after a
/// `---` line (content after `--- ` on the same line belongs to it) and ends at the next `---`
/// or `...` line; documents holding only blank lines and comments are skipped. Each is a slice
/// of `text` but for one that starts on its marker's line: a release is not copied whole.
pub fn split_documents<'a>(text: &'a str) -> Vec<Cow<'a, str>> {
    let mut documents = Vec::new();
    // The current document: an optional first line from a `--- content` marker, then a slice.
    let mut head = String::new();
    let mut from = 0;
    let mut flush = |head: &mut String, body: &'a str| {
        let meaningful = head.lines().chain(body.lines()).any(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#')
        });
        if meaningful && head.is_empty() {
            documents.push(Cow::Borrowed(body));
        } else if meaningful {
            documents.push(Cow::Owned(std::mem::take(head) + body));
        } else {
            head.clear();
        }
    };
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        if !line.starts_with("---") && !line.starts_with("...") {
            continue;
        }
        let bare = line.trim_end_matches(['\n', '\r']);
        let marker =
            |m: &str| bare == m || bare.strip_prefix(m).is_some_and(|rest| rest.starts_with([' ', '\t']));
        if marker("---") {
            flush(&mut head, &text[from..start]);
            let rest = bare[3..].trim_start();
            if !rest.is_empty() && !rest.starts_with('#') {
                head.push_str(rest);
                head.push('\n');
            }
            from = offset;
        } else if marker("...") {
            flush(&mut head, &text[from..start]);
            from = offset;
        }
    }
    flush(&mut head, &text[from..]);
    documents
}

/// Parses YAML text into JSON values.
pub fn parse_value(text: &str) -> Result<Value, String> {
    serde_saphyr::from_str::<Value>(text).map_err(|e| describe_error(&e))
}

/// A YAML error as conditions may carry it: where and what, without the text it quotes (the
/// document is a remote server's, and may be anything that server holds).
pub fn describe_error(e: &serde_saphyr::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    without_quoted(first)
}

/// `text` with what it quotes (`"…"` and serde's `` `…` ``) left out: errors quote the input,
/// which may be remote text or a secret, and they end up in conditions and events.
fn without_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (None, '"' | '`') => {
                quote = Some(c);
                out.push(c);
                out.push('…');
            }
            (Some(q), c) if c == q => {
                quote = None;
                out.push(c);
            }
            (Some(_), _) => {}
            (None, c) => out.push(c),
        }
    }
    out
}

/// A JSON error as where it is and what kind, never the text it quotes (remote text, or a
/// Secret's).
pub fn describe_json_error(e: &serde_json::Error) -> String {
    let kind = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "not of the expected shape",
        serde_json::error::Category::Eof => "cut short",
    };
    format!("{kind} (line {}, column {}): {}", e.line(), e.column(), without_quoted(&e.to_string()))
}

/// A value as block-style YAML.
pub fn to_yaml(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|_| format!("{value}\n"))
}

/// The entries of a block mapping whose keys sit at column `indent`: (key, byte range of the
/// whole entry, including its key line). `None` when the text is not plain block style.
fn outline(text: &str, indent: usize) -> Option<Vec<(String, Range<usize>)>> {
    let mut entries: Vec<(String, Range<usize>)> = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let content = line.trim_end_matches(['\n', '\r']);
        let stripped = content.trim_start_matches(' ');
        let column = content.len() - stripped.len();
        // Deeper lines, and a compact sequence (`key:` then `- item` at the key's column),
        // continue the entry above.
        let sequence_item = column == indent && (stripped == "-" || stripped.starts_with("- "));
        if stripped.is_empty() || stripped.starts_with('#') || column > indent || sequence_item {
            match entries.last_mut() {
                Some((_, range)) => range.end = offset,
                None if stripped.is_empty() || stripped.starts_with('#') => {}
                None => return None,
            }
            continue;
        }
        if column < indent || content.starts_with('\t') {
            return None;
        }
        let key = block_key(stripped)?;
        entries.push((key, start..offset));
    }
    Some(entries)
}

/// The key of a `key: value` or `key:` line, for plain and quoted keys.
fn block_key(line: &str) -> Option<String> {
    let (key, rest) = if let Some(quoted) = line.strip_prefix('"') {
        let end = quoted.find('"')?;
        (quoted[..end].to_string(), &quoted[end + 1..])
    } else if let Some(quoted) = line.strip_prefix('\'') {
        let end = quoted.find('\'')?;
        (quoted[..end].to_string(), &quoted[end + 1..])
    } else {
        let end = line.find(':')?;
        let key = &line[..end];
        if key.is_empty()
            || key.contains([' ', '{', '[', '&', '*', '!', '|', '>', '#', '?', ','])
            || key.starts_with('-')
        {
            return None;
        }
        (key.to_string(), &line[end..])
    };
    let after = rest.strip_prefix(':')?;
    // The value on the key line must not use anchors and tags, nor open a flow collection that
    // goes on past the line (`names: {kind: Cluster, plural: clusters}` is whole on its line).
    let value = after.trim_start();
    let flow = value.starts_with(['{', '[']);
    if !(after.is_empty() || after.starts_with(' '))
        || value.starts_with(['&', '*', '!'])
        || (flow && !closed_on_its_line(value))
    {
        return None;
    }
    Some(key)
}

/// Whether a flow collection that starts `value` closes on the same line: brackets balanced
/// outside quotes, and nothing but a comment after the last.
fn closed_on_its_line(value: &str) -> bool {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut closed_at = None;
    for (i, c) in value.char_indices() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '{' | '[') => depth += 1,
            (None, '}' | ']') => {
                depth = match depth.checked_sub(1) {
                    Some(d) => d,
                    None => return false,
                };
                if depth == 0 {
                    closed_at = Some(i + 1);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(end) = closed_at else { return false };
    let rest = value[end..].trim();
    rest.is_empty() || rest.starts_with('#')
}

/// Whether the text uses anchors, aliases or tags, which outlining could separate from their
/// use.
fn has_references(text: &str) -> bool {
    let bytes = text.as_bytes();
    memchr::memchr3_iter(b'&', b'*', b'!', bytes).any(|i| {
        i > 0
            && matches!(bytes[i - 1], b' ' | b'-' | b'\n')
            && bytes.get(i + 1).is_some_and(u8::is_ascii_alphanumeric)
    })
}

/// A top-level entry of an outlined document.
#[derive(Debug, Clone)]
struct Entry {
    key: String,
    /// The original text of the whole entry.
    text: String,
    /// The replacement value, once set.
    value: Option<Value>,
    /// For `spec`: the outline of its children, once asked for.
    children: Option<Children>,
}

#[derive(Debug, Clone)]
struct Children {
    indent: usize,
    /// The text of the key line (`spec:`).
    head: String,
    entries: Vec<Entry>,
}

/// One YAML document, parsed whole or outlined.
#[derive(Debug, Clone)]
pub struct Document(Repr);

#[derive(Debug, Clone)]
enum Repr {
    Full(Value),
    Outlined(Vec<Entry>),
}

impl Document {
    /// The nodes it holds: counted when parsed whole; for an outlined document (block style,
    /// with flow collections only closed on their line) at most a key and a value a line and
    /// one more a flow separator, which bounds what it decodes to.
    pub fn nodes(&self) -> usize {
        let flow = |text: &str| text.bytes().filter(|b| matches!(b, b',' | b'[' | b'{')).count();
        match &self.0 {
            Repr::Full(value) => count_nodes(value),
            Repr::Outlined(entries) => {
                entries.iter().map(|e| 2 * e.text.lines().count() + flow(&e.text)).sum()
            }
        }
    }

    /// Parses a document, outlining it when it is large and in plain block style.
    pub fn parse(text: &str) -> Result<Document, String> {
        if text.len() >= OUTLINE_THRESHOLD
            && !has_references(text)
            && let Some(entries) = outline(text, 0)
            && !entries.is_empty()
        {
            let entries = entries
                .into_iter()
                .map(|(key, range)| Entry { key, text: text[range].to_string(), value: None, children: None })
                .collect();
            return Ok(Document(Repr::Outlined(entries)));
        }
        match parse_value(text)? {
            value @ Value::Object(_) => Ok(Document(Repr::Full(value))),
            Value::Null => Ok(Document(Repr::Full(Value::Object(Map::new())))),
            other => Err(format!("a document must be an object, not {}", describe(&other))),
        }
    }

    /// A document holding `value`.
    pub fn from_value(value: Value) -> Document {
        Document(Repr::Full(value))
    }

    /// Whether the document is kept as outlined text.
    pub fn is_outlined(&self) -> bool {
        matches!(self.0, Repr::Outlined(_))
    }

    /// The top-level entry `key`.
    pub fn get(&self, key: &str) -> Result<Option<Value>, String> {
        match &self.0 {
            Repr::Full(value) => Ok(value.get(key).cloned()),
            Repr::Outlined(entries) => match entries.iter().find(|e| e.key == key) {
                None => Ok(None),
                Some(entry) => entry_value(entry).map(Some),
            },
        }
    }

    /// Replaces (or adds) the top-level entry `key`.
    pub fn set(&mut self, key: &str, value: Value) {
        match &mut self.0 {
            Repr::Full(doc) => {
                doc[key] = value;
            }
            Repr::Outlined(entries) => match entries.iter_mut().find(|e| e.key == key) {
                Some(entry) => {
                    entry.value = Some(value);
                    entry.children = None;
                }
                None => entries.push(Entry {
                    key: key.into(),
                    text: String::new(),
                    value: Some(value),
                    children: None,
                }),
            },
        }
    }

    /// The entry `child` of the top-level object `parent` (`spec.conversion`).
    pub fn get_child(&mut self, parent: &str, child: &str) -> Result<Option<Value>, String> {
        match &mut self.0 {
            Repr::Full(value) => Ok(value.get(parent).and_then(|p| p.get(child)).cloned()),
            Repr::Outlined(entries) => {
                let Some(entry) = entries.iter_mut().find(|e| e.key == parent) else { return Ok(None) };
                if entry.value.is_some() || children(entry).is_none() {
                    return Ok(entry_value(entry)?.get(child).cloned());
                }
                let kids = entry.children.as_ref().expect("outlined above");
                match kids.entries.iter().find(|e| e.key == child) {
                    None => Ok(None),
                    Some(kid) => entry_value(kid).map(Some),
                }
            }
        }
    }

    /// Replaces (or adds) the entry `child` of the top-level object `parent`.
    pub fn set_child(&mut self, parent: &str, child: &str, value: Value) -> Result<(), String> {
        match &mut self.0 {
            Repr::Full(doc) => {
                doc[parent][child] = value;
                Ok(())
            }
            Repr::Outlined(entries) => {
                let Some(entry) = entries.iter_mut().find(|e| e.key == parent) else {
                    let mut map = Map::new();
                    map.insert(child.into(), value);
                    entries.push(Entry {
                        key: parent.into(),
                        text: String::new(),
                        value: Some(Value::Object(map)),
                        children: None,
                    });
                    return Ok(());
                };
                if entry.value.is_some() || children(entry).is_none() {
                    let mut whole = entry_value(entry)?;
                    whole[child] = value;
                    entry.value = Some(whole);
                    return Ok(());
                }
                let kids = entry.children.as_mut().expect("outlined above");
                match kids.entries.iter_mut().find(|e| e.key == child) {
                    Some(kid) => kid.value = Some(value),
                    None => kids.entries.push(Entry {
                        key: child.into(),
                        text: String::new(),
                        value: Some(value),
                        children: None,
                    }),
                }
                Ok(())
            }
        }
    }

    /// The whole document as a value (parses everything).
    pub fn to_value(&self) -> Result<Value, String> {
        match &self.0 {
            Repr::Full(value) => Ok(value.clone()),
            Repr::Outlined(_) => parse_value(&self.to_yaml()),
        }
    }

    /// The document as YAML text, ending with a newline.
    pub fn to_yaml(&self) -> String {
        match &self.0 {
            Repr::Full(value) => to_yaml(value),
            Repr::Outlined(entries) => entries.iter().map(|e| entry_text(e, 0)).collect(),
        }
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "a list",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        _ => "null",
    }
}

/// The value of an entry: its replacement, or its text parsed.
fn entry_value(entry: &Entry) -> Result<Value, String> {
    if let Some(value) = &entry.value {
        return Ok(value.clone());
    }
    let text = match &entry.children {
        Some(_) => entry_text(entry, 0),
        None => entry.text.clone(),
    };
    let indent = text.len() - text.trim_start_matches(' ').len();
    // Taken out of what was parsed, not copied: a CRD's `spec` is most of a megabyte.
    match parse_value(&dedent(&text, indent))? {
        Value::Object(mut parsed) => Ok(parsed.remove(&entry.key).unwrap_or(Value::Null)),
        _ => Ok(Value::Null),
    }
}

/// Outlines the children of an entry whose value is a block mapping, once.
fn children(entry: &mut Entry) -> Option<&Children> {
    if entry.children.is_none() && entry.value.is_none() {
        let (head, body) = entry.text.split_once('\n')?;
        let indent = body
            .lines()
            .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .map(|l| l.len() - l.trim_start_matches(' ').len())?;
        let own = head.len() - head.trim_start_matches(' ').len();
        if indent <= own || !head.trim_end().ends_with(':') {
            return None;
        }
        let entries = outline(body, indent)?
            .into_iter()
            .map(|(key, range)| Entry { key, text: body[range].to_string(), value: None, children: None })
            .collect();
        entry.children = Some(Children { indent, head: format!("{head}\n"), entries });
    }
    entry.children.as_ref()
}

/// The text of an entry at column `indent`: original, rebuilt from its children, or its
/// replacement serialized.
fn entry_text(entry: &Entry, indent: usize) -> String {
    if let Some(value) = &entry.value {
        let mut map = Map::new();
        map.insert(entry.key.clone(), value.clone());
        return reindent(&to_yaml(&Value::Object(map)), indent);
    }
    match &entry.children {
        Some(kids) => {
            let mut text = kids.head.clone();
            for kid in &kids.entries {
                text.push_str(&entry_text(kid, kids.indent));
            }
            text
        }
        None => entry.text.clone(),
    }
}

fn dedent(text: &str, by: usize) -> String {
    text.split_inclusive('\n')
        .map(|l| {
            let spaces = l.len() - l.trim_start_matches(' ').len();
            &l[spaces.min(by)..]
        })
        .collect()
}

fn reindent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    text.split_inclusive('\n')
        .map(|l| if l.trim().is_empty() { l.to_string() } else { format!("{pad}{l}") })
        .collect()
}

#[cfg(test)]
mod tests;
