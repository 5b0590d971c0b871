//! File and directory names for ids in a legacy tree. The old writer used an
//! id as its file name unescaped (an id with `/` made sub-directories); the
//! tree writer escapes what could leave its directory, and the reader uses
//! the same function to recognise a job directory named that way.

use sha2::{Digest, Sha256};

/// Longest file stem written; longer ids are cut and end in a hash.
const MAX_STEM_BYTES: usize = 200;

/// A file or directory name for an id that can never escape its directory:
/// `/`, `\`, NUL, control characters, `%` and `~` are %-escaped, a leading
/// `.` too (so no `.`/`..`/hidden names), the empty id is `%`, and a name
/// too long for a file system is cut and ends in `~` and a hash of the id.
/// Distinct ids give distinct names. Ids that need none of this are kept
/// as they are, as the legacy writer did.
pub fn safe_file_stem(id: &str) -> String {
    if id.is_empty() {
        return "%".to_string();
    }
    let mut stem = String::with_capacity(id.len());
    for (index, ch) in id.chars().enumerate() {
        let escape = matches!(ch, '/' | '\\' | '%' | '~' | '\0')
            || ch.is_control()
            || (index == 0 && ch == '.');
        if escape {
            let mut buffer = [0u8; 4];
            for byte in ch.encode_utf8(&mut buffer).bytes() {
                stem.push_str(&format!("%{byte:02X}"));
            }
        } else {
            stem.push(ch);
        }
    }
    if stem.len() <= MAX_STEM_BYTES {
        return stem;
    }
    let mut cut = MAX_STEM_BYTES - 17;
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    // Do not end inside a %XX escape.
    if let Some(percent) = stem[..cut].rfind('%') {
        if cut - percent < 3 {
            cut = percent;
        }
    }
    let digest = Sha256::digest(id.as_bytes());
    let hash: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{}~{hash}", &stem[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_names() {
        assert_eq!(safe_file_stem("item_7"), "item_7");
        assert_eq!(safe_file_stem("a b ünï"), "a b ünï");
        assert_eq!(safe_file_stem("a/b"), "a%2Fb");
        assert_eq!(safe_file_stem(".."), "%2E.");
        assert_eq!(safe_file_stem("/etc/passwd"), "%2Fetc%2Fpasswd");
        assert_eq!(safe_file_stem("nul\0x"), "nul%00x");
        assert_eq!(safe_file_stem(""), "%");
        assert_ne!(safe_file_stem("a%2Fb"), safe_file_stem("a/b"));
        let long = "x".repeat(1000);
        let stem = safe_file_stem(&long);
        assert!(stem.len() <= MAX_STEM_BYTES);
        assert_ne!(stem, safe_file_stem(&"x".repeat(1001)));
        let long_escapes = "/".repeat(300);
        assert!(safe_file_stem(&long_escapes).len() <= MAX_STEM_BYTES);
        assert!(!safe_file_stem(&"é".repeat(300)).contains('/'));
    }
}
