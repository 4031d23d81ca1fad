//! The layering the design asks for, checked on the source: no module imports one that imports
//! it back, directly or around a longer loop (ceph -> collect -> enforcer -> ... -> ceph). A
//! cycle makes every change on one side a change on the other; this test names it when it
//! appears. Test modules (`tests`, `*_tests`, test-only fakes) are left out: they may look
//! anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`enforcer::decide`) -> file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path
                .strip_prefix(src)
                .expect("under src")
                .with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            out.insert(parts.join("::"), path);
        }
    }
    out
}

fn is_test_only(module: &str) -> bool {
    let last = module.rsplit("::").next().unwrap_or(module);
    last == "tests" || last.ends_with("_tests") || last == "fake_cluster" || last == "test_support"
}

/// The code that imports: no inline `#[cfg(test)] mod tests { ... }` block (tests may import
/// anything) and no comments (a doc comment naming another module is not an import). A `//`
/// right after `:` is a URL in a string, not a comment.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|line| {
            let cut = line
                .match_indices("//")
                .find(|(i, _)| *i == 0 || line.as_bytes()[i - 1] != b':')
                .map_or(line.len(), |(i, _)| i);
            &line[..cut]
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::a::b`, `super::x`, `self::y` path in `text`, and the items of brace imports
/// (`use crate::a::{b, c::d}` gives `crate::a::b` and `crate::a::c`).
fn paths(text: &str) -> Vec<String> {
    // Bytes, not chars: the paths are ASCII, and comments around them may not be.
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let at = |i: usize, s: &str| b[i..].starts_with(s.as_bytes());
    let ascii = |from: usize, to: usize| String::from_utf8_lossy(&b[from..to]).into_owned();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = ["crate::", "super::", "self::"].iter().any(|p| at(i, p));
        if !starts || (i > 0 && word(b[i - 1])) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && (word(b[j]) || at(j, "::")) {
            j += if at(j, "::") { 2 } else { 1 };
        }
        let path = ascii(i, j).trim_end_matches("::").to_string();
        if j < b.len() && b[j] == b'{' {
            let close = b[j..]
                .iter()
                .position(|&c| c == b'}')
                .map_or(b.len(), |c| j + c);
            for item in ascii(j + 1, close).split(',') {
                let head = item.trim().split("::").next().unwrap_or("");
                let head = head.split_whitespace().next().unwrap_or("");
                if !head.is_empty() && head != "self" {
                    out.push(format!("{path}::{head}"));
                }
            }
            i = close;
        } else {
            out.push(path);
            i = j;
        }
    }
    out
}

/// The module a path names: the longest prefix that is a module, relative to `from`.
fn resolve(from: &str, path: &str, modules: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut parts: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = if from.is_empty() {
        Vec::new()
    } else {
        from.split("::").collect()
    };
    match parts.first().copied() {
        Some("crate") => {
            base.clear();
            parts.remove(0);
        }
        Some("self") => {
            parts.remove(0);
        }
        Some("super") => {
            while parts.first() == Some(&"super") {
                base.pop();
                parts.remove(0);
            }
        }
        _ => return None,
    }
    let full: Vec<&str> = base.into_iter().chain(parts).collect();
    (1..=full.len())
        .rev()
        .map(|n| full[..n].join("::"))
        .find(|m| modules.contains_key(m))
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &modules {
        if is_test_only(module) || module.split("::").any(is_test_only) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read module");
        for path in paths(&code(&text)) {
            let Some(target) = resolve(module, &path, &modules) else {
                continue;
            };
            // A module naming its own parent's items is Rust's ordinary layout, not a cycle
            // between two concerns; one naming its own children likewise.
            let related = target == *module
                || module.starts_with(&format!("{target}::"))
                || target.starts_with(&format!("{module}::"));
            if !related && !is_test_only(&target) {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    // A cycle is a path from a module back to itself; report each once, shortest first.
    let mut cycles: BTreeSet<Vec<String>> = BTreeSet::new();
    for start in edges.keys() {
        let mut queue = vec![vec![start.clone()]];
        let mut seen = BTreeSet::new();
        while let Some(path) = (!queue.is_empty()).then(|| queue.remove(0)) {
            let last = path.last().expect("non-empty");
            for next in edges.get(last).into_iter().flatten() {
                if next == start {
                    let mut cycle = path.clone();
                    let min = (0..cycle.len())
                        .min_by_key(|&i| &cycle[i])
                        .unwrap_or_default();
                    cycle.rotate_left(min);
                    cycles.insert(cycle);
                } else if seen.insert(next.clone()) && path.len() < 8 {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    queue.push(longer);
                }
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "modules that import each other (move what both need into a module of its own):\n{}",
        cycles
            .iter()
            .map(|c| format!("  {} -> {}", c.join(" -> "), c[0]))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn comments_are_not_imports() {
    let text = "/// see crate::lease\nlet u = \"http://h/x\"; // crate::tuning\nuse crate::units;";
    assert_eq!(paths(&code(text)), vec!["crate::units"]);
}

#[test]
fn the_import_reader_finds_paths_and_brace_items() {
    let text =
        "use crate::ceph::{ops, parse::status::X};\nlet a = super::fmt(1); crate::units::fmt_ms(2)";
    assert_eq!(
        paths(text),
        vec![
            "crate::ceph::ops",
            "crate::ceph::parse",
            "super::fmt",
            "crate::units::fmt_ms"
        ]
    );
}
