//! The documents cannot rot: every `ceph-recovery-budget ...` command shown in a shell code block
//! of README.md or docs/*.md parses with the program's own command line, every `scripts/NAME`
//! names a script that exists (and `scripts/ceph-lab SUB` a subcommand that script handles), every
//! `cargo test --test X` / `cargo bench --bench X` names a target that exists, every relative
//! link leads to a file (and heading) that exists, and README.md stays a short front door.
//!
//! Each failure names the file and line and says what is wrong; all failures of a kind are
//! reported together.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use ceph_recovery_budget::cli::Cli;
use clap::Parser;

const PROGRAM: &str = "ceph-recovery-budget";
/// README.md is the front door; the detail lives in docs/.
const README_MAX_LINES: usize = 260;
/// Code blocks whose lines are shell commands.
const SHELL_LANGUAGES: &[&str] = &["sh", "bash", "shell", "console", "shell-session"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One document: its path relative to the repository and its text.
struct Doc {
    path: String,
    text: String,
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// README.md and every docs/*.md.
fn docs() -> Vec<Doc> {
    let mut paths = vec!["README.md".to_string()];
    let dir = repo().join("docs");
    let mut in_docs: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| {
            entry
                .expect("a docs/ entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    in_docs.sort();
    paths.extend(in_docs);
    paths
        .into_iter()
        .map(|path| Doc {
            text: read(&repo().join(&path)),
            path,
        })
        .collect()
}

/// A shell command in a code block: the line it starts on (1-based) and its text, with line
/// continuations joined and the prompt and trailing comment removed.
struct ShellCommand {
    line: usize,
    text: String,
}

/// A line that opens or closes a fenced code block, and the block's language.
fn fence(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("```")?;
    Some(rest.split_whitespace().next().unwrap_or(""))
}

/// The line without a trailing `# comment` (a `#` outside quotes, at the start or after a blank).
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && previous.is_whitespace() => return &line[..i],
            _ => {}
        }
        previous = c;
    }
    line
}

/// The commands of every shell code block of a document. In `console` blocks only the lines
/// with a `$ ` prompt are commands (the others are output); in `sh`/`bash` blocks every line
/// that is not blank or a comment.
fn shell_commands(text: &str) -> Vec<ShellCommand> {
    let mut commands = Vec::new();
    let mut block: Option<String> = None;
    let mut lines = text.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        if let Some(language) = fence(line) {
            block = match block {
                None => Some(language.to_string()),
                Some(_) => None,
            };
            continue;
        }
        let Some(language) = block.as_deref() else {
            continue;
        };
        if !SHELL_LANGUAGES.contains(&language) {
            continue;
        }
        let trimmed = line.trim_start();
        let (prompted, command) = match trimmed.strip_prefix("$ ") {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        if (language == "console" || language == "shell-session") && !prompted {
            continue;
        }
        let mut text = String::new();
        let mut part = strip_comment(command).trim_end().to_string();
        while let Some(continued) = part.strip_suffix('\\') {
            text.push_str(continued);
            text.push(' ');
            match lines.next() {
                Some((_, next)) => {
                    if fence(next).is_some() {
                        // A block that ends on a continuation: nothing more to join.
                        block = None;
                        part = String::new();
                        break;
                    }
                    part = strip_comment(next).trim_end().to_string();
                }
                None => {
                    part = String::new();
                    break;
                }
            }
        }
        text.push_str(&part);
        let text = text.trim().to_string();
        if !text.is_empty() {
            commands.push(ShellCommand {
                line: index + 1,
                text,
            });
        }
    }
    commands
}

/// The inline code spans (`...` on one line) outside code blocks, with their line numbers.
fn inline_code(text: &str) -> Vec<(usize, String)> {
    let mut spans = Vec::new();
    let mut in_block = false;
    for (index, line) in text.lines().enumerate() {
        if fence(line).is_some() {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(code), Some(_)) = (parts.next(), parts.next()) {
            spans.push((index + 1, code.to_string()));
        }
    }
    spans
}

/// The simple commands of a shell line: words split as the shell does, cut at `|`, `&&`, `||`,
/// `;` and `&`.
fn simple_commands(words: Vec<String>) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    for word in words {
        if ["|", "||", "&&", ";", "&"].contains(&word.as_str()) {
            commands.push(Vec::new());
        } else {
            commands
                .last_mut()
                .expect("one command at least")
                .push(word);
        }
    }
    commands.retain(|c| !c.is_empty());
    commands
}

/// The words after leading `NAME=value` assignments and wrappers such as `watch`.
fn without_prefixes(words: &[String]) -> &[String] {
    let mut rest = words;
    while let Some(first) = rest.first() {
        let assignment = first.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if assignment || ["watch", "sudo", "time", "exec"].contains(&first.as_str()) {
            rest = &rest[1..];
        } else {
            break;
        }
    }
    rest
}

/// The arguments up to the first redirection (`> file`, `2>&1`, `< file`).
fn without_redirections(words: &[String]) -> Vec<String> {
    words
        .iter()
        .take_while(|w| {
            !(w.starts_with('>')
                || w.starts_with('<')
                || w.starts_with("2>")
                || w.starts_with("1>"))
        })
        .cloned()
        .collect()
}

/// Whether a word runs this program (`ceph-recovery-budget`, `target/release/ceph-recovery-budget`).
fn runs_program(word: &str) -> bool {
    word.rsplit('/').next() == Some(PROGRAM)
}

/// Checks one command line of a document; `what` says where it was found.
fn check_program_invocations(
    place: &str,
    text: &str,
    found: &mut usize,
    failures: &mut Vec<String>,
) {
    let words = match shell_words::split(text) {
        Ok(words) => words,
        Err(e) => {
            if text.contains(PROGRAM) {
                failures.push(format!(
                    "{place}: `{text}` cannot be split like shell words ({e})"
                ));
            }
            return;
        }
    };
    for command in simple_commands(words) {
        let command = without_prefixes(&command);
        let Some(first) = command.first() else {
            continue;
        };
        if !runs_program(first) {
            continue;
        }
        *found += 1;
        let mut args = vec![PROGRAM.to_string()];
        args.extend(without_redirections(&command[1..]));
        if let Err(e) = Cli::try_parse_from(&args) {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) && args
                .iter()
                .any(|a| a == "--help" || a == "-h" || a == "--version")
            {
                continue;
            }
            let reason = e.to_string();
            let reason = reason.lines().next().unwrap_or("").trim();
            failures.push(format!(
                "{place}: `{}` is not a command {PROGRAM} accepts: {reason}",
                args.join(" ")
            ));
        }
    }
}

#[test]
fn every_documented_command_of_the_program_parses() {
    let mut failures = Vec::new();
    let mut found = 0;
    for doc in docs() {
        for command in shell_commands(&doc.text) {
            let place = format!("{}:{}", doc.path, command.line);
            check_program_invocations(&place, &command.text, &mut found, &mut failures);
        }
        for (line, code) in inline_code(&doc.text) {
            if code.starts_with(&format!("{PROGRAM} ")) {
                let place = format!("{}:{line} (inline code)", doc.path);
                check_program_invocations(&place, &code, &mut found, &mut failures);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "documented commands that the program rejects (fix the document, or the program if the \
         document is right):\n{}",
        failures.join("\n")
    );
    assert!(
        found >= 20,
        "only {found} `{PROGRAM}` commands found in README.md and docs/*.md code blocks: is the \
         extraction broken?"
    );
}

/// The subcommands `scripts/ceph-lab` handles: the arms of its `case "$cmd" in`.
fn ceph_lab_subcommands() -> BTreeSet<String> {
    let path = repo().join("scripts/ceph-lab");
    let text = read(&path);
    let mut lines = text.lines().enumerate();
    let start = lines
        .by_ref()
        .find(|(_, line)| line.trim() == "case \"$cmd\" in")
        .unwrap_or_else(|| {
            panic!("scripts/ceph-lab: no `case \"$cmd\" in` dispatching its subcommands found")
        });
    let indent = |line: &str| line.len() - line.trim_start().len();
    let case_indent = indent(start.1);
    let mut arms = BTreeSet::new();
    for (index, line) in lines {
        if line.trim() == "esac" && indent(line) == case_indent {
            return arms;
        }
        let Some((pattern, _)) = line.split_once(')') else {
            continue;
        };
        let pattern = pattern.trim();
        if pattern.is_empty()
            || pattern == "*"
            || !pattern
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_| ".contains(c))
        {
            continue;
        }
        for name in pattern.split('|') {
            let name = name.trim();
            assert!(
                !name.is_empty(),
                "scripts/ceph-lab:{}: empty case pattern in `{}`",
                index + 1,
                line.trim()
            );
            arms.insert(name.to_string());
        }
    }
    panic!(
        "scripts/ceph-lab: the `case \"$cmd\" in` at line {} has no `esac`",
        start.0 + 1
    )
}

/// Every `scripts/NAME [SUB]` in a piece of shell text: the name and the word after it.
fn script_invocations(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(at) = rest.find("scripts/") {
        let absolute = offset + at;
        let before = text[..absolute].chars().next_back();
        let starts_word = before.is_none_or(|c| c.is_whitespace() || "'\"(=`".contains(c));
        let after = &text[absolute + "scripts/".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
            .collect();
        let tail = &after[name.len()..];
        let sub: String = if tail.starts_with([' ', '\t']) {
            tail.trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect()
        } else {
            String::new()
        };
        if starts_word && !name.is_empty() {
            found.push((name, sub));
        }
        offset = absolute + "scripts/".len();
        rest = &text[offset..];
    }
    found
}

#[test]
fn every_documented_script_exists_with_its_subcommand() {
    let subcommands = ceph_lab_subcommands();
    let mut failures = Vec::new();
    let mut found = 0;
    for doc in docs() {
        let commands = shell_commands(&doc.text)
            .into_iter()
            .map(|c| (format!("{}:{}", doc.path, c.line), c.text));
        let inline = inline_code(&doc.text)
            .into_iter()
            .filter(|(_, code)| code.starts_with("scripts/"))
            .map(|(line, code)| (format!("{}:{line} (inline code)", doc.path), code));
        for (place, text) in commands.chain(inline) {
            for (name, sub) in script_invocations(&text) {
                found += 1;
                let path = repo().join("scripts").join(&name);
                let Ok(meta) = fs::metadata(&path) else {
                    failures.push(format!("{place}: `scripts/{name}` does not exist"));
                    continue;
                };
                if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
                    failures.push(format!(
                        "{place}: `scripts/{name}` is not an executable file"
                    ));
                    continue;
                }
                if name == "ceph-lab" && !sub.is_empty() && !subcommands.contains(&sub) {
                    failures.push(format!(
                        "{place}: `scripts/ceph-lab {sub}`: scripts/ceph-lab has no subcommand \
                         `{sub}` (it handles: {})",
                        subcommands.iter().cloned().collect::<Vec<_>>().join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "documented scripts that do not exist or do not take the command shown:\n{}",
        failures.join("\n")
    );
    assert!(
        found >= 10,
        "only {found} `scripts/...` invocations found in README.md and docs/*.md: is the \
         extraction broken?"
    );
}

#[test]
fn every_documented_cargo_target_exists() {
    let mut failures = Vec::new();
    let mut found = 0;
    for doc in docs() {
        for command in shell_commands(&doc.text) {
            let Ok(words) = shell_words::split(&command.text) else {
                continue;
            };
            for simple in simple_commands(words) {
                let simple = without_prefixes(&simple);
                if simple.first().map(String::as_str) != Some("cargo") {
                    continue;
                }
                let mut words = simple.iter().take_while(|w| w.as_str() != "--");
                while let Some(word) = words.next() {
                    let (kind, name) = match word.split_once('=') {
                        Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
                        None => (word.clone(), None),
                    };
                    let dir = match kind.as_str() {
                        "--test" => "tests",
                        "--bench" => "benches",
                        _ => continue,
                    };
                    let Some(name) = name.or_else(|| words.next().cloned()) else {
                        failures.push(format!(
                            "{}:{}: `{kind}` without a target name",
                            doc.path, command.line
                        ));
                        continue;
                    };
                    found += 1;
                    let file = repo().join(dir).join(format!("{name}.rs"));
                    let main = repo().join(dir).join(&name).join("main.rs");
                    if !file.is_file() && !main.is_file() {
                        failures.push(format!(
                            "{}:{}: `cargo ... {kind} {name}`: neither {dir}/{name}.rs nor \
                             {dir}/{name}/main.rs exists",
                            doc.path, command.line
                        ));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "documented cargo commands naming a test or bench that does not exist:\n{}",
        failures.join("\n")
    );
    assert!(
        found >= 3,
        "only {found} `cargo test --test`/`cargo bench --bench` targets found: is the extraction \
         broken?"
    );
}

/// The anchors GitHub gives the headings of a markdown text: lowercase, punctuation dropped,
/// spaces to `-`, a repeated one suffixed `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut in_block = false;
    for line in text.lines() {
        if fence(line).is_some() {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let heading = line[hashes..].trim().trim_end_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut candidate = slug.clone();
        let mut n = 0;
        while anchors.contains(&candidate) {
            n += 1;
            candidate = format!("{slug}-{n}");
        }
        anchors.insert(candidate);
    }
    anchors
}

/// The markdown links `[text](target)` of a document outside code, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut in_block = false;
    for (index, line) in text.lines().enumerate() {
        if fence(line).is_some() {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        // Inline code is not a link.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, part)| part)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            found.push((index + 1, target.to_string()));
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn every_relative_link_leads_to_a_file_and_heading() {
    let mut failures = Vec::new();
    let mut found = 0;
    for doc in docs() {
        let dir = Path::new(&doc.path).parent().unwrap_or(Path::new(""));
        for (line, target) in links(&doc.text) {
            if target.is_empty() {
                failures.push(format!("{}:{line}: a link with no target", doc.path));
                continue;
            }
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            found += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                repo().join(&doc.path)
            } else {
                repo().join(dir).join(path)
            };
            if !file.exists() {
                failures.push(format!(
                    "{}:{line}: link to `{target}`: {} does not exist",
                    doc.path,
                    file.strip_prefix(repo()).unwrap_or(&file).display()
                ));
                continue;
            }
            let Some(anchor) = anchor else {
                continue;
            };
            if file.extension().and_then(|e| e.to_str()) != Some("md") {
                failures.push(format!(
                    "{}:{line}: link to `{target}`: an anchor into a file that is not markdown",
                    doc.path
                ));
                continue;
            }
            if !anchors(&read(&file)).contains(anchor) {
                failures.push(format!(
                    "{}:{line}: link to `{target}`: {} has no heading with the anchor #{anchor}",
                    doc.path,
                    file.strip_prefix(repo()).unwrap_or(&file).display()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "broken relative links:\n{}",
        failures.join("\n")
    );
    assert!(
        found >= 20,
        "only {found} relative links found in README.md and docs/*.md: is the extraction broken?"
    );
}

#[test]
fn readme_stays_a_short_front_door() {
    let text = read(&repo().join("README.md"));
    let lines = text.lines().count();
    assert!(
        lines < README_MAX_LINES,
        "README.md:{lines}: README.md has {lines} lines, at most {} allowed: move the detail into \
         a document under docs/ and link it from the table of topics",
        README_MAX_LINES - 1
    );
}

#[test]
fn the_extraction_reads_prompts_comments_and_continuations() {
    let text = "```console\n$ ceph-recovery-budget status   # a comment\noutput line\n```\n\
                ```sh\nceph-recovery-budget lint \\\n    --file dump.json # why\n# only a comment\n```\n\
                ```yaml\nnot: a command\n```\n";
    let commands: Vec<(usize, String)> = shell_commands(text)
        .into_iter()
        .map(|c| (c.line, c.text))
        .collect();
    assert_eq!(
        commands,
        vec![
            (2, "ceph-recovery-budget status".to_string()),
            (
                6,
                "ceph-recovery-budget lint      --file dump.json".to_string()
            ),
        ]
    );
    assert_eq!(
        script_invocations(
            "eval \"$(scripts/ceph-lab env)\"; x --fio-cmd 'scripts/ceph-lab fio-json 12'"
        ),
        vec![
            ("ceph-lab".to_string(), "env".to_string()),
            ("ceph-lab".to_string(), "fio-json".to_string()),
        ]
    );
    let anchors = anchors("# A\n## The enforcer (present unless `--enforcer.mode off`)\n## A\n```sh\n# not a heading\n```\n");
    assert!(anchors.contains("the-enforcer-present-unless---enforcermode-off"));
    assert!(anchors.contains("a") && anchors.contains("a-1"));
    assert!(!anchors.contains("not-a-heading"));
}
