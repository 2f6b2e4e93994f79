//! Quoting a path for the shell of a node's terminal (spec N-TERM), so that pasting it at
//! the prompt gives the shell exactly that path, as one word, with nothing expanded or run.
//!
//! The quoting is chosen by the shell's program name as the node advertised it; a shell
//! not named here is refused rather than guessed at. A path holding a control character
//! is refused for every shell: pasted, a CR or LF would run the line, and other controls
//! drive the terminal itself.

use ferry_codes::Code;

/// Why a path cannot be pasted into a shell.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuoteError {
    /// The shell's quoting is not known.
    #[error(
        "the node's shell {0:?} is not one whose quoting ferry knows (sh, bash, dash, ash, \
         ksh, zsh, fish, pwsh, powershell, cmd): run the node with one of those as $SHELL"
    )]
    UnsupportedShell(String),
    /// The path cannot be quoted for this shell.
    #[error("{0}")]
    UnquotablePath(String),
}

impl QuoteError {
    /// The code this refusal is answered with.
    pub fn code(&self) -> Code {
        match self {
            QuoteError::UnsupportedShell(_) => Code::UnsupportedShell,
            QuoteError::UnquotablePath(_) => Code::UnquotablePath,
        }
    }
}

/// The families of shells whose quoting differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// sh, bash, dash, ash, ksh, zsh.
    Posix,
    Fish,
    PowerShell,
    Cmd,
}

fn family(shell: &str, platform: &str) -> Option<Family> {
    // Windows names programs case-insensitively, with or without `.exe`.
    let name = if platform == "windows" {
        let lower = shell.to_ascii_lowercase();
        lower.strip_suffix(".exe").unwrap_or(&lower).to_owned()
    } else {
        shell.to_owned()
    };
    match name.as_str() {
        "sh" | "bash" | "dash" | "ash" | "ksh" | "zsh" => Some(Family::Posix),
        "fish" => Some(Family::Fish),
        "pwsh" | "powershell" => Some(Family::PowerShell),
        "cmd" => Some(Family::Cmd),
        _ => None,
    }
}

/// `path` quoted for `shell` (the program name a node advertised) on `platform` (`linux`,
/// `macos`, `windows`, …): one word the shell reads back as exactly `path`.
pub fn quote_path(platform: &str, shell: &str, path: &str) -> Result<String, QuoteError> {
    let family =
        family(shell, platform).ok_or_else(|| QuoteError::UnsupportedShell(shell.into()))?;
    if let Some(c) = path.chars().find(|c| c.is_control()) {
        return Err(QuoteError::UnquotablePath(format!(
            "the path holds the control character U+{:04X}, which no shell can be given safely \
             at a prompt",
            u32::from(c)
        )));
    }
    Ok(match family {
        Family::Posix if platform == "windows" => posix(&git_bash_path(path)),
        Family::Posix => posix(path),
        Family::Fish => fish(path),
        Family::PowerShell => powershell(path),
        Family::Cmd => cmd(path)?,
    })
}

/// Single quotes, each `'` closed, escaped and reopened: nothing is special inside.
fn posix(path: &str) -> String {
    format!("'{}'", path.replace('\'', r"'\''"))
}

/// Single quotes, in which fish still reads `\\` and `\'`.
fn fish(path: &str) -> String {
    format!("'{}'", path.replace('\\', r"\\").replace('\'', r"\'"))
}

/// Single quotes, each quote doubled. PowerShell takes the typographic single quotes
/// (U+2018 to U+201B) for `'` too, so they are doubled as well.
fn powershell(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 2);
    out.push('\'');
    for c in path.chars() {
        if matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}') {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// Double quotes; `%` and `!` are expanded even inside them and `"` cannot be escaped, so
/// a path holding any of them is refused.
fn cmd(path: &str) -> Result<String, QuoteError> {
    if let Some(c) = path.chars().find(|c| matches!(c, '%' | '!' | '"')) {
        return Err(QuoteError::UnquotablePath(format!(
            "cmd.exe expands or ends on {c:?} even inside double quotes, so a path holding it \
             cannot be pasted safely"
        )));
    }
    Ok(format!("\"{path}\""))
}

/// A Windows path as Git Bash names it: `C:\Users\a` is `/c/Users/a`, and every
/// backslash a slash (`\\server\share` is `//server/share`).
fn git_bash_path(path: &str) -> String {
    let bytes = path.as_bytes();
    let slashed = path.replace('\\', "/");
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        let drive = char::from(bytes[0].to_ascii_lowercase());
        format!("/{drive}{}", &slashed[2..])
    } else {
        slashed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_quotes_its_way() {
        let cases = [
            ("linux", "bash", "/tmp/it's", r"'/tmp/it'\''s'"),
            ("linux", "zsh", "/a b", "'/a b'"),
            ("linux", "fish", r"/a\b'c", r"'/a\\b\'c'"),
            ("linux", "pwsh", "/it's", "'/it''s'"),
            (
                "windows",
                "powershell.exe",
                "C:\\it\u{2019}s",
                "'C:\\it\u{2019}\u{2019}s'",
            ),
            ("windows", "cmd.exe", r"C:\a b\c.txt", r#""C:\a b\c.txt""#),
            (
                "windows",
                "bash.exe",
                r"C:\Users\a\f.txt",
                "'/c/Users/a/f.txt'",
            ),
            (
                "windows",
                "bash",
                r"\\srv\share\it's",
                r"'//srv/share/it'\''s'",
            ),
        ];
        for (platform, shell, path, want) in cases {
            assert_eq!(
                quote_path(platform, shell, path).unwrap(),
                want,
                "{shell} {path}"
            );
        }
    }

    #[test]
    fn cmd_refuses_what_it_would_expand() {
        for path in [r"C:\100%", r"C:\hi!", r#"C:\a"b"#] {
            let err = quote_path("windows", "cmd", path).unwrap_err();
            assert_eq!(err.code(), Code::UnquotablePath, "{path}");
        }
    }

    #[test]
    fn a_control_character_is_refused_for_every_shell() {
        for shell in [
            "sh", "bash", "dash", "ash", "ksh", "zsh", "fish", "pwsh", "cmd",
        ] {
            for path in [
                "/a\nb",
                "/a\rb",
                "/a\tb",
                "/a\u{1b}[2Jb",
                "/a\u{7f}",
                "/a\u{85}b",
            ] {
                let err = quote_path("linux", shell, path).unwrap_err();
                assert_eq!(err.code(), Code::UnquotablePath, "{shell} {path:?}");
            }
        }
    }

    #[test]
    fn another_shell_is_refused() {
        for shell in [
            "tcsh", "csh", "nu", "xonsh", "elvish", "BASH", "", "bash.exe",
        ] {
            let err = quote_path("linux", shell, "/a").unwrap_err();
            assert_eq!(err.code(), Code::UnsupportedShell, "{shell:?}");
        }
    }
}
