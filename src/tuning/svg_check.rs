//! A minimal XML reader for the charts' tests: enough to check that an SVG is well-formed and
//! to pull out elements and attributes by id, as a user's viewer would find them.

/// Panics unless `xml` is one balanced element tree with quoted attributes and only the five
/// predefined entities (or numeric references).
pub(crate) fn assert_well_formed(xml: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut roots = 0;
    let mut rest = xml;
    if let Some(r) = rest.strip_prefix("<?xml") {
        rest = &r[r.find("?>").expect("unterminated prolog") + 2..];
    }
    loop {
        let Some(lt) = rest.find('<') else {
            assert!(rest.trim().is_empty(), "text after the root: {rest:?}");
            break;
        };
        let text = &rest[..lt];
        check_text(text);
        if stack.is_empty() {
            assert!(text.trim().is_empty(), "text outside the root: {text:?}");
        }
        rest = &rest[lt + 1..];
        if let Some(r) = rest.strip_prefix("!--") {
            rest = &r[r.find("-->").expect("unterminated comment") + 3..];
            continue;
        }
        let mut quote = None;
        let mut end = None;
        for (i, c) in rest.char_indices() {
            match (quote, c) {
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, '>') => {
                    end = Some(i);
                    break;
                }
                (_, '<') => panic!("'<' inside a tag: {}", &rest[..i]),
                _ => {}
            }
        }
        let end = end.expect("unterminated tag");
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(name.trim()),
                "mismatched </{name}>"
            );
            continue;
        }
        let self_closing = tag.ends_with('/');
        let body = tag.trim_end_matches('/');
        let name_end = body.find(char::is_whitespace).unwrap_or(body.len());
        let name = &body[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_:".contains(c)),
            "bad element name {name:?}"
        );
        check_attributes(&body[name_end..]);
        if stack.is_empty() {
            roots += 1;
        }
        if !self_closing {
            stack.push(name.to_string());
        }
    }
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
    assert_eq!(roots, 1, "one root element");
}

pub(crate) fn check_attributes(mut s: &str) {
    let mut seen = Vec::new();
    loop {
        s = s.trim_start();
        if s.is_empty() {
            return;
        }
        let eq = s
            .find('=')
            .unwrap_or_else(|| panic!("attribute without value: {s}"));
        let name = &s[..eq];
        assert!(
            !name.is_empty() && !name.contains(char::is_whitespace),
            "bad attribute name {name:?}"
        );
        assert!(!seen.contains(&name), "duplicate attribute {name}");
        seen.push(name);
        let after = &s[eq + 1..];
        let q = after.chars().next().expect("missing value");
        assert!(q == '"' || q == '\'', "unquoted attribute {name}");
        let close = after[1..].find(q).expect("unterminated value") + 1;
        check_text(&after[1..close]);
        s = &after[close + 1..];
    }
}

pub(crate) fn check_text(s: &str) {
    assert!(!s.contains('<') && !s.contains('>'), "raw < or > in {s:?}");
    for (i, _) in s.match_indices('&') {
        let tail = &s[i..];
        let ok = ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
            .iter()
            .any(|e| tail.starts_with(e))
            || (tail.starts_with("&#")
                && tail[2..]
                    .find(';')
                    .is_some_and(|n| n > 0 && tail[2..2 + n].chars().all(|c| c.is_ascii_digit())));
        assert!(ok, "bare & in {s:?}");
    }
}

/// The start tag of the element with this id.
pub(crate) fn tag<'a>(svg: &'a str, id: &str) -> Option<&'a str> {
    let at = svg.find(&format!(r#" id="{id}""#))?;
    let start = svg[..at].rfind('<')?;
    let end = at + svg[at..].find('>')?;
    Some(&svg[start..=end])
}

pub(crate) fn attr(tag: &str, name: &str) -> String {
    let key = format!(r#" {name}=""#);
    let at = tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + key.len();
    tag[at..at + tag[at..].find('"').unwrap()].to_string()
}

pub(crate) fn num(tag: &str, name: &str) -> f64 {
    attr(tag, name).parse().unwrap()
}

/// The text content of the element with this id.
pub(crate) fn content<'a>(svg: &'a str, id: &str) -> &'a str {
    let t = tag(svg, id).unwrap_or_else(|| panic!("no element {id}"));
    let start = svg.find(t).unwrap() + t.len();
    &svg[start..start + svg[start..].find('<').unwrap()]
}

pub(crate) fn ids(svg: &str, prefix: &str) -> Vec<usize> {
    svg.match_indices(&format!(r#" id="{prefix}-"#))
        .map(|(at, m)| {
            let rest = &svg[at + m.len()..];
            rest[..rest.find('"').unwrap()].parse().unwrap()
        })
        .collect()
}
