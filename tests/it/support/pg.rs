//! A database of its own for each test, on the throwaway PostgreSQL server
//! `./test.sh` starts (`scripts/postgres.sh`): its URL is in
//! `GATEHOUSE_TEST_DATABASE_URL` (a superuser's, on database `postgres`).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The server's URL; a test that needs PostgreSQL fails, saying how to get
/// one, when there is none.
pub fn server_url() -> String {
    std::env::var("GATEHOUSE_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "no PostgreSQL for this test: run ./test.sh (it starts one), or set \
             GATEHOUSE_TEST_DATABASE_URL to a superuser's url \
             (scripts/postgres.sh start DIR prints one)"
        )
    })
}

/// Whether the whole suite runs on PostgreSQL
/// (`GATEHOUSE_TEST_BACKEND=postgresql`, `./test.sh`'s second pass): every
/// [`super::Env::new`] then has a migrated database of its own.
pub fn suite_on_postgresql() -> bool {
    std::env::var("GATEHOUSE_TEST_BACKEND").is_ok_and(|b| b == "postgresql")
}

/// `url` with its database replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let path = url[authority..]
        .find('/')
        .map_or(url.len(), |i| authority + i);
    let query = url[path..].find('?').map_or("", |i| &url[path + i..]);
    format!("{}/{name}{query}", &url[..path])
}

/// `url` logging in as `role` (no password: the test server trusts
/// loopback).
pub fn as_role(url: &str, role: &str) -> String {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let at = url[authority..]
        .find('@')
        .map_or(authority, |i| authority + i + 1);
    format!("{}{role}@{}", &url[..authority], &url[at..])
}

/// One test's database, dropped at the end.
pub struct Database {
    /// The owner's (superuser's) URL of the database.
    pub url: String,
    name: String,
}

impl Database {
    /// A new, empty database (no schema: `gatehouse migrate` makes it).
    pub fn new() -> Database {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "gh_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let server = server_url();
        let mut admin = postgres::Client::connect(&server, postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot reach the test postgresql at {server}: {e}"));
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create the test database");
        Database {
            url: with_database(&server, &name),
            name,
        }
    }

    /// A migrated database (as `gatehouse migrate` makes it).
    pub fn migrated() -> Database {
        let db = Database::new();
        gatehouse::state::pg::Pg::new(&db.url)
            .and_then(|pg| pg.migrate())
            .unwrap_or_else(|e| panic!("migrate the test database: {e}"));
        db
    }

    /// A connection as the owner.
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("connect to the test database")
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // On a thread of its own, as in `Env::new`: a test's async runtime
        // may be the one dropping it.
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            if let Ok(mut admin) = postgres::Client::connect(&server_url(), postgres::NoTls) {
                let _ =
                    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
            }
        })
        .join();
    }
}

#[test]
fn a_url_gets_another_database_and_another_role() {
    assert_eq!(
        with_database("postgres://gatehouse@127.0.0.1:5/postgres", "gh_1"),
        "postgres://gatehouse@127.0.0.1:5/gh_1"
    );
    assert_eq!(
        with_database("postgres://u@h:5/postgres?sslmode=disable", "x"),
        "postgres://u@h:5/x?sslmode=disable"
    );
    assert_eq!(
        as_role("postgres://gatehouse@127.0.0.1:5/gh_1", "gatehouse_node"),
        "postgres://gatehouse_node@127.0.0.1:5/gh_1"
    );
}
