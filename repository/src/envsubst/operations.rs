//! The string operations of `${VAR...}` forms, as drone/envsubst does them: substrings,
//! prefix and suffix trimming and replacing by glob, and case changes.

use super::ReplaceMode;

/// Offsets count bytes, as Go's do; a cut inside a character leaves the replacement character.
pub(super) fn substring(value: &str, args: &str) -> String {
    let chars: &[u8] = value.as_bytes();
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
    String::from_utf8_lossy(&chars[start..end]).into_owned()
}

/// Shell glob matching (`*`, `?`, `[...]`, `\\x`), as drone/envsubst uses Go's `path.Match`.
/// Iterative, backing up to the last `*`: time is at most pattern length times text length,
/// whatever the pattern (a recursive matcher is exponential in the number of `*`).
pub(super) fn glob(pattern: &[char], text: &[char]) -> bool {
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

pub(super) fn trim_prefix(value: &str, pattern: &str, longest: bool) -> String {
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

pub(super) fn trim_suffix(value: &str, pattern: &str, longest: bool) -> String {
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

pub(super) fn replace(value: &str, pattern: &str, replacement: &str, mode: ReplaceMode) -> String {
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

pub(super) fn change_case(value: &str, upper: bool, all: bool) -> String {
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
