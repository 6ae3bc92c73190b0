//! Quoting for the POSIX shell scripts the build writes (the link scripts, and their tests'
//! stand-in tools): paths may hold spaces and quotes.

/// `s` as one word of a POSIX shell command.
pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::sh_quote;

    #[test]
    fn quoting() {
        assert_eq!(sh_quote("/usr/bin/opt-22"), "'/usr/bin/opt-22'");
        assert_eq!(sh_quote("/a b/it's"), r"'/a b/it'\''s'");
    }
}
