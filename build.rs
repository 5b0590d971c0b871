//! Rebuild when a migration is added or changed: `embed_migrations!` reads the
//! directory at compile time and cargo does not know about it otherwise.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
