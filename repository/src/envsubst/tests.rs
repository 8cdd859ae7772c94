use super::operations::glob;
use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "NAME" => Some("my-cluster".into()),
        "EMPTY" => Some(String::new()),
        "B" => Some("bee".into()),
        "PATH_V" => Some("/usr/local/bin/tool".into()),
        "DOLLAR" => Some("a$b${C}".into()),
        "MIXED" => Some("hello World".into()),
        "UTF" => Some("héllo".into()),
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
        // drone's names take `-`: this is the variable UNSET-dflt.
        (
            "${UNSET-dflt}",
            "error: the variable UNSET-dflt is not set; set it in the environment or in the clusterctl config file",
        ),
        ("${EMPTY:=dflt}", "dflt"),
        ("${EMPTY=dflt}", "dflt"),
        ("${EMPTY:-dflt}", "dflt"),
        ("${NAME:=dflt}", "my-cluster"),
        ("${UNSET:=x${B}y}", "xbeey"),
        // An empty default is none (drone parses no argument): the variable is required.
        (
            "${UNSET:=}",
            "error: the variable UNSET is not set; set it in the environment or in the clusterctl config file",
        ),
        (
            "${UNSET=} ${UNSET:-}",
            "error: the variable UNSET is not set; set it in the environment or in the clusterctl config file",
        ),
        ("${EMPTY:=}", ""),
        // Any argument counts as a default: unset, these read as empty.
        ("[${UNSET#p}]", "[]"),
        ("[${UNSET/a/b}]", "[]"),
        ("[${UNSET:1}]", "[]"),
        // Lengths and substrings count bytes, as Go's strings do.
        ("${#UTF}", "6"),
        ("${UTF:0:3}", "hé"),
        ("${UTF:0:2}", "h\u{FFFD}"),
        // Plain-text escapes.
        ("a\\\\b a\\/b", "a\\b a/b"),
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
        // drone's bad substitutions fail the whole text, quoting the first with its line.
        (
            "a\n${",
            "error: bad substitution \"${\" on line 2: it is no ${...} form that clusterctl can expand; write $${ for a literal ${",
        ),
        (
            "${NAME\nnext",
            "error: bad substitution \"${NAME\" on line 1: it is no ${...} form that clusterctl can expand; write $${ for a literal ${",
        ),
        (
            "${}",
            "error: bad substitution \"${}\" on line 1: it is no ${...} form that clusterctl can expand; write $${ for a literal ${",
        ),
        (
            "${NAME} ${1BAD}",
            "error: bad substitution \"${1BAD}\" on line 1: it is no ${...} form that clusterctl can expand; write $${ for a literal ${",
        ),
        (
            "${arr[@]}",
            "error: bad substitution \"${arr[@]}\" on line 1: it is no ${...} form that clusterctl can expand; write $${ for a literal ${",
        ),
        (
            "echo ${#arr[@]}",
            "error: bad substitution \"${#arr[@]}\" on line 1: it is no ${...} form that clusterctl can expand; write $${ for a literal ${",
        ),
        (
            "${UNSET+x}",
            "error: bad substitution \"${UNSET+x}\" on line 1: it is no ${...} form that clusterctl can expand; write $${ for a literal ${",
        ),
        (
            "${NAME?x}",
            "error: bad substitution \"${NAME?x}\" on line 1: it is no ${...} form that clusterctl can expand; write $${ for a literal ${",
        ),
        (
            "${NAME :=x}",
            "error: bad substitution \"${NAME :=x}\" on line 1: it is no ${...} form that clusterctl can expand; write $${ for a literal ${",
        ),
        (
            "${UNSET:=${1X}}",
            "error: bad substitution \"${1X}\" on line 1: it is no ${...} form that clusterctl can expand; write $${ for a literal ${",
        ),
        (
            "${UNSET} ${",
            "error: bad substitution \"${\" on line 1: it is no ${...} form that clusterctl can expand; write $${ for a literal ${",
        ),
        ("$${arr[@]}", "${arr[@]}"),
        ("${NAME:+set}", "my-cluster"),
        ("${ NAME}${NAME }", "my-clustermy-cluster"),
        (
            "${UNSET}",
            "error: the variable UNSET is not set; set it in the environment or in the clusterctl config file",
        ),
        (
            "${Z} ${A} ${Z}",
            "error: the variables A, Z are not set; set them in the environment or in the clusterctl config file",
        ),
        // Variables inside a default are neither required nor listed.
        ("[${UNSET:=${ALSO_UNSET}}]", "[]"),
        ("${NAME:=${ALSO_UNSET}}", "my-cluster"),
    ];
    for (text, expect) in cases {
        assert_eq!(run(text), expect, "{text}");
    }
}

#[test]
fn variables_are_listed_sorted_with_their_defaults() {
    // D, inside a default, is not listed; an argument counts as a default, an empty one not.
    let text = "${B} ${A:=1} ${C:-x${D}y} ${A} ${#E} $NOT ${ F } ${G/a/b} ${H:=}";
    let listed: Vec<(String, Option<String>)> =
        list_variables(text).into_iter().map(|v| (v.name, v.default)).collect();
    let want = [
        ("A", Some("1")),
        ("B", None),
        ("C", Some("x${D}y")),
        ("E", None),
        ("F", None),
        ("G", Some("a/b")),
        ("H", None),
    ];
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

#[test]
fn nesting_is_bounded_with_the_line_it_starts_on() {
    let nested = |depth: usize| format!("a: 1\nb: {}x{}\n", "${A:-".repeat(depth), "}".repeat(depth));
    assert_eq!(expand(&nested(MAX_NESTING), &|_| None), Ok("a: 1\nb: x\n".to_string()));
    let refused = expand(&nested(MAX_NESTING + 1), &|_| None).unwrap_err();
    assert_eq!(refused, ExpandError::TooDeep { line: 2 });
    assert!(refused.to_string().contains("nest more than 32 deep"), "{refused}");
    // Thousands of levels, closed or not, are refused without exhausting a stack.
    let handle = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(|| {
            let deep = "${A:-".repeat(5000);
            (expand(&deep, &|_| None), expand(&format!("{deep}{}", "}".repeat(5000)), &|_| None))
        })
        .unwrap();
    let (open, closed) = handle.join().expect("no stack overflow");
    assert!(open.is_err() && closed.is_err());
}

#[test]
fn output_is_bounded() {
    let big = "x".repeat(1 << 20);
    let lookup = |name: &str| (name == "X").then(|| big.clone());
    let repeated = "${X}".repeat(65);
    assert_eq!(expand(&repeated, &lookup), Err(ExpandError::TooLarge));
    assert_eq!(expand(&"${X}".repeat(3), &lookup).map(|s| s.len()), Ok(3 << 20));
    // One replacement that multiplies the value: refused before the text is made.
    let lookup = |name: &str| match name {
        "X" => Some("a".repeat(1 << 20)),
        "R" => Some("b".repeat(100)),
        _ => None,
    };
    assert_eq!(expand("${X//a/${R}}", &lookup), Err(ExpandError::TooLarge));
    assert!(ExpandError::TooLarge.to_string().contains("beyond 64 MiB"));
}

#[test]
fn forms_that_never_close_cost_one_pass() {
    // Each `${` once scanned to the end of the text for its brace: 200,000 of them on lines
    // of their own (1 MiB of release) took hours. Every one is a bad substitution, found in
    // one pass.
    let text = "a: ${\n".repeat(200_000);
    let refused = expand(&text, &|_| None).unwrap_err();
    assert!(matches!(refused, ExpandError::Bad(_)), "{refused:?}");
    // Closed and unclosed forms mixed find the same braces as before.
    assert_eq!(expand("${A:=x} ${B", &|_| None).map_err(|_| ()), Err(()));
    assert_eq!(expand("}${A:=x}{", &|_| None), Ok("}x{".to_string()));
    assert_eq!(expand("${A:=${B:=y}}", &|_| None), Ok("y".to_string()));
}
