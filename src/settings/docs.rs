//! The flag table of docs/configuration.md, generated from the settings so it cannot drift.

use super::{table, FLAG_ONLY};

/// Where the table lives, between these two lines.
pub const DOC: &str = "docs/configuration.md";
pub const BEGIN: &str = "<!-- flags:begin -->";
pub const END: &str = "<!-- flags:end -->";

/// The markdown table of every setting (and the flag-only ones, said as such).
pub fn markdown_table() -> String {
    let mut out = String::from("| flag | file key | default | |\n|---|---|---|---|\n");
    for flag in FLAG_ONLY {
        out += &format!("| `--{flag}` | (flag only) | unset | the config file itself; also `CEPH_RECOVERY_BUDGET_CONFIG` |\n");
    }
    for s in table() {
        let default = match s.default {
            Some(d) => format!("`{d}`"),
            None => "unset".to_string(),
        };
        let note = if s.note.is_empty() {
            " "
        } else {
            &format!(" {} ", s.note)
        };
        out += &format!("| `--{}` | `{}` | {default} |{note}|\n", s.flag, s.key);
    }
    out
}

/// The document with the table between the markers replaced; `None` when a marker is missing.
pub fn with_table(doc: &str) -> Option<String> {
    let begin = doc.find(BEGIN)? + BEGIN.len();
    let end = begin + doc[begin..].find(END)?;
    Some(format!(
        "{}\n{}{}",
        &doc[..begin],
        markdown_table(),
        &doc[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_flag_table_is_generated_from_the_settings() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
        let doc = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let Some(expected) = with_table(&doc) else {
            panic!("{DOC} has no {BEGIN} ... {END} section for the flag table");
        };
        if doc == expected {
            return;
        }
        if std::env::var_os("CRB_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &expected)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            return;
        }
        panic!(
            "the flag table in {DOC} differs from the settings (src/settings/mod.rs); regenerate it with\n  \
             CRB_UPDATE_DOCS=1 cargo test --lib settings\nexpected table:\n{}",
            markdown_table()
        );
    }

    #[test]
    fn no_note_breaks_its_row() {
        for s in table() {
            assert!(!s.note.contains('|'), "--{}: a `|` in the note", s.flag);
        }
    }

    #[test]
    fn the_table_replaces_only_what_is_between_the_markers() {
        let doc = format!("before\n{BEGIN}\nold | table\n{END}\nafter\n");
        let new = with_table(&doc).unwrap();
        assert!(
            new.starts_with(&format!("before\n{BEGIN}\n| flag |")),
            "{new}"
        );
        assert!(new.ends_with(&format!("|\n{END}\nafter\n")), "{new}");
        assert_eq!(with_table(&new).unwrap(), new, "idempotent");
        assert!(with_table("no markers").is_none());
    }
}
