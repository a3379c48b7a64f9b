//! Identity: API keys on every surface, tenants apart, the authorization matrix.
//!
//! The matrix sends every route with each kind of bad credential (none, malformed,
//! wrong secret, revoked, expired), as another agent of the same tenant, as a read-only
//! key writing, and as a key of another tenant, and checks the exact status and that no
//! byte of the owner's data comes back.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::helpers::*;
use mnemos::auth::Scope;

const RW: &[Scope] = &[Scope::Read, Scope::Write];
const READ: &[Scope] = &[Scope::Read];
const ADMIN: &[Scope] = &[Scope::Read, Scope::Write, Scope::Admin];

fn key(tenant: &'static str, agent: Option<&'static str>, scopes: &'static [Scope]) -> KeySpec {
    KeySpec {
        tenant,
        agent,
        scopes,
        expires_at: None,
        revoked: false,
    }
}

/// The keys of the matrix, in the order [`fixture`] seeds them.
struct Keys {
    admin: String,
    alice: String,
    alice_reader: String,
    bob: String,
    globex: String,
    initech: String,
    revoked: String,
    expired: String,
    acme_admin: String,
}

/// What alice of tenant acme owns: a memory, a session, a project, a KV namespace.
struct Owned {
    memory: String,
    /// An entity alice's memory names (`{E}`).
    entity: String,
    session: &'static str,
    project: &'static str,
    namespace: &'static str,
}

/// The secret alice's memory holds; no answer to anyone else may contain it.
const SECRET: &str = "the vault code is 4471";

async fn fixture() -> (TestApp, Keys, Owned) {
    let (app, secrets) = spawn_with_keys(&[
        SERVER_ADMIN,
        key("acme", Some("alice"), RW),
        key("acme", Some("alice"), READ),
        key("acme", Some("bob"), RW),
        key("globex", None, RW),
        key("initech", None, RW),
        KeySpec {
            revoked: true,
            ..key("acme", Some("alice"), RW)
        },
        KeySpec {
            expires_at: Some(chrono::Utc::now() - chrono::Duration::minutes(5)),
            ..key("acme", Some("alice"), RW)
        },
        key("acme", None, ADMIN),
    ])
    .await;
    let mut secrets = secrets.into_iter();
    let mut next = || secrets.next().expect("a secret per key");
    let keys = Keys {
        admin: next(),
        alice: next(),
        alice_reader: next(),
        bob: next(),
        globex: next(),
        initech: next(),
        revoked: next(),
        expired: next(),
        acme_admin: next(),
    };
    let alice = Some(bearer(&keys.alice));
    let remembered = assert_status(
        app.send_as(
            alice.as_deref(),
            Method::POST,
            "/tools/remember",
            Some(&json!({"content": format!("Alice's note: {SECRET}"), "tags": ["vault"]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    // The entity index follows the outbox: wait until alice's memory names something.
    let mut entity = None;
    for _ in 0..200 {
        let listed = app
            .send_as(
                alice.as_deref(),
                Method::GET,
                "/v1/entities?agent_id=alice",
                None,
            )
            .await;
        let listed: Value = listed.json().await.unwrap_or_default();
        if let Some(id) = listed["entities"][0]["id"].as_str() {
            entity = Some(id.to_string());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let owned = Owned {
        entity: entity.expect("alice's memory names an entity within 10 s"),
        memory: remembered["memory"]["id"]
            .as_str()
            .expect("an id")
            .to_string(),
        session: "alice-chat",
        project: "alice-proj",
        namespace: "alice-ns",
    };
    for (method, path, body) in [
        (
            Method::POST,
            format!("/v1/sessions/{}/messages", owned.session),
            json!({"role": "user", "content": format!("remember: {SECRET}")}),
        ),
        (
            Method::PUT,
            format!("/v1/projects/{}", owned.project),
            json!({"name": "Vault project"}),
        ),
        (
            Method::PUT,
            format!("/v1/namespaces/{}/entries/code", owned.namespace),
            json!({"value": SECRET}),
        ),
    ] {
        let response = app
            .send_as(alice.as_deref(), method.clone(), &path, Some(&body))
            .await;
        assert!(
            response.status().is_success(),
            "{method} {path}: {}",
            response.status()
        );
    }
    (app, keys, owned)
}

fn bearer(secret: &str) -> String {
    format!("Bearer {secret}")
}

/// What a route needs from its caller.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Needs {
    Read,
    Write,
    Admin,
}

/// One route of the matrix: method, path and body with `{X}` (the memory), `{S}`,
/// `{P}`, `{N}` (session, project, namespace), what it needs, and whether the request
/// names the agent alice (so a key bound to another agent is refused).
struct Route {
    method: Method,
    path: &'static str,
    body: Option<Value>,
    needs: Needs,
    names_alice: bool,
}

fn route(method: Method, path: &'static str, body: Option<Value>, needs: Needs) -> Route {
    let names_alice = body.as_ref().is_some_and(|b| b.get("agent_id").is_some())
        || path.contains("agent_id=alice");
    Route {
        method,
        path,
        body,
        needs,
        names_alice,
    }
}

/// Every route of the service that acts on data, naming alice and her things.
fn routes() -> Vec<Route> {
    use Method as M;
    use Needs::*;
    let a = |extra: Value| {
        let mut body = json!({"agent_id": "alice"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        Some(body)
    };
    vec![
        route(
            M::POST,
            "/tools/remember",
            a(json!({"content": "more"})),
            Write,
        ),
        route(
            M::POST,
            "/tools/remember_batch",
            a(json!({"memories": [{"content": "batched"}]})),
            Write,
        ),
        route(
            M::POST,
            "/tools/recall",
            a(json!({"query": "vault code"})),
            Read,
        ),
        route(
            M::POST,
            "/tools/associate",
            a(json!({"from_id": "{X}", "to_id": "{X}"})),
            Write,
        ),
        route(
            M::POST,
            "/tools/spreading_activation",
            a(json!({"seed_id": "{X}"})),
            Read,
        ),
        route(M::POST, "/tools/forget", a(json!({"id": "{X}"})), Write),
        route(M::POST, "/tools/consolidate", a(json!({})), Write),
        route(M::POST, "/tools/reflect", a(json!({})), Read),
        route(
            M::POST,
            "/tools/memory_history",
            a(json!({"id": "{X}"})),
            Read,
        ),
        route(
            M::POST,
            "/tools/build_context",
            a(json!({"query": "vault code"})),
            Read,
        ),
        route(
            M::POST,
            "/tools/extract_turn",
            a(json!({"user": "I prefer tea.", "assistant": "Noted.", "session_id": "{S}"})),
            Write,
        ),
        route(M::GET, "/v1/memories?agent_id=alice", None, Read),
        route(M::GET, "/v1/memories/{X}?agent_id=alice", None, Read),
        route(
            M::PATCH,
            "/v1/memories/{X}?agent_id=alice",
            Some(json!({"content": "overwritten"})),
            Write,
        ),
        route(M::DELETE, "/v1/memories/{X}?agent_id=alice", None, Write),
        route(
            M::GET,
            "/v1/memories/{X}/history?agent_id=alice",
            None,
            Read,
        ),
        route(
            M::GET,
            "/v1/memories/{X}/associations?agent_id=alice",
            None,
            Read,
        ),
        route(M::GET, "/v1/memories/{X}/graph?agent_id=alice", None, Read),
        route(
            M::GET,
            "/v1/memories/{X}/retention?agent_id=alice",
            None,
            Read,
        ),
        route(
            M::POST,
            "/v1/memories/bulk",
            a(json!({"ids": ["{X}"], "action": "forget"})),
            Write,
        ),
        route(M::GET, "/v1/agents", None, Read),
        route(M::GET, "/v1/sessions?agent_id=alice", None, Read),
        route(M::GET, "/v1/namespaces", None, Read),
        route(M::GET, "/v1/entities?agent_id=alice", None, Read),
        route(M::GET, "/v1/entities/{E}?agent_id=alice", None, Read),
        route(M::GET, "/v1/facts?agent_id=alice", None, Read),
        route(
            M::POST,
            "/v1/entities/{E}/merge",
            a(json!({"into": "{E}"})),
            Write,
        ),
        route(
            M::POST,
            "/v1/entities/{E}/split",
            a(json!({"alias": "nobody"})),
            Write,
        ),
        route(M::GET, "/v1/cognition/runs?agent_id=alice", None, Read),
        route(M::GET, "/v1/projects?agent_id=alice", None, Read),
        route(M::GET, "/v1/projects/{P}?agent_id=alice", None, Read),
        route(
            M::PUT,
            "/v1/projects/{P}",
            a(json!({"name": "taken"})),
            Write,
        ),
        route(M::PUT, "/v1/projects/{P}/sessions/{S}", a(json!({})), Write),
        route(
            M::PUT,
            "/v1/namespaces/{N}",
            a(json!({"max_entries": 1})),
            Write,
        ),
        route(M::GET, "/v1/namespaces/{N}/stats", None, Read),
        route(
            M::GET,
            "/v1/namespaces/{N}/entries?agent_id=alice",
            None,
            Read,
        ),
        route(M::GET, "/v1/namespaces/{N}/entries/code", None, Read),
        route(
            M::PUT,
            "/v1/namespaces/{N}/entries/code",
            a(json!({"value": "overwritten"})),
            Write,
        ),
        route(M::DELETE, "/v1/namespaces/{N}/entries/code", None, Write),
        route(
            M::POST,
            "/v1/namespaces/{N}/search",
            a(json!({"query": "vault"})),
            Read,
        ),
        route(
            M::POST,
            "/v1/sessions/{S}/messages",
            a(json!({"role": "user", "content": "hi"})),
            Write,
        ),
        route(
            M::GET,
            "/v1/sessions/{S}/messages?agent_id=alice",
            None,
            Read,
        ),
        route(M::POST, "/v1/sessions/{S}/compact", a(json!({})), Write),
        route(M::POST, "/v1/admin/archive", None, Admin),
        route(M::GET, "/v1/admin/keys", None, Admin),
        route(
            M::POST,
            "/v1/admin/keys",
            Some(json!({"tenant": "acme", "agent": "*", "scopes": ["admin"]})),
            Admin,
        ),
        route(M::DELETE, "/v1/admin/keys/000000000000", None, Admin),
        route(M::GET, "/v1/admin/audit", None, Admin),
        route(M::POST, "/v1/admin/actors/graph/fail", None, Admin),
        route(M::GET, "/metrics", None, Admin),
    ]
}

/// `text` with alice's things (or, for `ghost`, things that exist nowhere) filled in.
fn fill(text: &str, owned: &Owned, ghost: bool) -> String {
    if ghost {
        text.replace("{X}", "0190f0f0-0000-7000-8000-000000000000")
            .replace("{E}", "ent_000000000000000000000000")
            .replace("{S}", "ghost-chat")
            .replace("{P}", "ghost-proj")
            .replace("{N}", "ghost-ns")
    } else {
        text.replace("{X}", &owned.memory)
            .replace("{E}", &owned.entity)
            .replace("{S}", owned.session)
            .replace("{P}", owned.project)
            .replace("{N}", owned.namespace)
    }
}

/// Send `route` with `authorization`; the status, the body as text.
async fn call(
    app: &TestApp,
    authorization: Option<&str>,
    route: &Route,
    owned: &Owned,
    ghost: bool,
) -> (StatusCode, String) {
    let path = fill(route.path, owned, ghost);
    let body = route
        .body
        .as_ref()
        .map(|b| serde_json::from_str::<Value>(&fill(&b.to_string(), owned, ghost)).unwrap());
    let response = app
        .send_as(authorization, route.method.clone(), &path, body.as_ref())
        .await;
    let status = response.status();
    (status, response.text().await.unwrap_or_default())
}

/// The error code of a contract error body.
fn code(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["code"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Assert an answer refused the request with `status`/`code` and carries none of alice's data.
fn refused(
    what: &str,
    route: &Route,
    (status, body): &(StatusCode, String),
    expected: StatusCode,
    expected_code: &str,
    owned: &Owned,
) {
    assert_eq!(
        (*status, code(body).as_str()),
        (expected, expected_code),
        "{what}: {} {}: {body}",
        route.method,
        route.path
    );
    assert!(
        !body.contains("4471") && !body.contains(&owned.memory),
        "{what}: {} {} leaked data: {body}",
        route.method,
        route.path
    );
}

#[tokio::test]
async fn every_route_refuses_bad_credentials_other_agents_readers_writing_and_other_tenants() {
    let (app, keys, owned) = fixture().await;
    let wrong_secret = {
        // The id of a real key with a secret that is not its own.
        let mut wrong = keys.alice.clone();
        let last = wrong.pop().unwrap();
        wrong.push(if last == '0' { '1' } else { '0' });
        wrong
    };
    let routes = routes();

    for route in &routes {
        for (what, authorization, says) in [
            ("no key", None, "Authorization"),
            (
                "not a bearer",
                Some("Basic YWxpY2U6eA==".to_string()),
                "Bearer",
            ),
            (
                "malformed key",
                Some(bearer("sk-not-a-mnemos-key")),
                "not a mnemos key",
            ),
            (
                "unknown key",
                Some(bearer(&format!(
                    "mnm_{}_{}",
                    "0".repeat(12),
                    "0".repeat(64)
                ))),
                "no key",
            ),
            ("wrong secret", Some(bearer(&wrong_secret)), "wrong"),
            ("revoked key", Some(bearer(&keys.revoked)), "revoked"),
            ("expired key", Some(bearer(&keys.expired)), "expired"),
        ] {
            let answer = call(&app, authorization.as_deref(), route, &owned, false).await;
            refused(
                what,
                route,
                &answer,
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                &owned,
            );
            assert!(
                answer.1.contains(says),
                "{what}: the message says why: {}",
                answer.1
            );
        }

        // (A KV namespace is the tenant's, shared by its agents: bob may use it
        // unless the request says it acts as alice.)
        if route.names_alice || route.needs == Needs::Admin {
            let bob = call(&app, Some(&bearer(&keys.bob)), route, &owned, false).await;
            refused(
                "bob's key",
                route,
                &bob,
                StatusCode::FORBIDDEN,
                "permission_denied",
                &owned,
            );
        }
        if route.needs != Needs::Read {
            let reader = call(
                &app,
                Some(&bearer(&keys.alice_reader)),
                route,
                &owned,
                false,
            )
            .await;
            refused(
                "a read-only key writing",
                route,
                &reader,
                StatusCode::FORBIDDEN,
                "permission_denied",
                &owned,
            );
        }
        if route.needs == Needs::Admin {
            let alice = call(&app, Some(&bearer(&keys.alice)), route, &owned, false).await;
            refused(
                "alice's key on an admin route",
                route,
                &alice,
                StatusCode::FORBIDDEN,
                "permission_denied",
                &owned,
            );
        }
    }

    // Another tenant: its key names alice and her ids and gets exactly what a tenant
    // that never heard of them gets for ids that exist nowhere (same status, same
    // code), never a byte of acme's data.
    for route in routes.iter().filter(|r| r.needs != Needs::Admin) {
        let reference = call(&app, Some(&bearer(&keys.initech)), route, &owned, true).await;
        let other = call(&app, Some(&bearer(&keys.globex)), route, &owned, false).await;
        assert_eq!(
            (other.0, code(&other.1)),
            (reference.0, code(&reference.1)),
            "another tenant's key on {} {} must see what a stranger sees for a ghost id: {} vs {}",
            route.method,
            route.path,
            other.1,
            reference.1
        );
        assert!(
            !other.1.contains("4471"),
            "{} {} leaked acme's data to globex: {}",
            route.method,
            route.path,
            other.1
        );
        if !other.0.is_success() {
            // An error reads word for word as the stranger's, ids aside: it tells
            // nothing about what exists in another tenant.
            let as_ghost = other
                .1
                .replace(&owned.memory, &fill("{X}", &owned, true))
                .replace(&owned.entity, &fill("{E}", &owned, true))
                .replace(owned.session, "ghost-chat")
                .replace(owned.project, "ghost-proj")
                .replace(owned.namespace, "ghost-ns");
            assert_eq!(
                as_ghost, reference.1,
                "{} {}: another tenant's error differs from a stranger's",
                route.method, route.path
            );
        }
    }

    // Nothing of alice's changed through any of it.
    let alice = Some(bearer(&keys.alice));
    let memory = assert_status(
        app.send_as(
            alice.as_deref(),
            Method::GET,
            &format!("/v1/memories/{}", owned.memory),
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(
        memory["content"].as_str().unwrap().contains(SECRET),
        "{memory}"
    );
    assert_eq!(memory["status"], "active", "{memory}");
    let entry = assert_status(
        app.send_as(
            alice.as_deref(),
            Method::GET,
            &format!("/v1/namespaces/{}/entries/code", owned.namespace),
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(entry["value"], SECRET, "{entry}");
    let window = assert_status(
        app.send_as(
            alice.as_deref(),
            Method::GET,
            &format!("/v1/sessions/{}/messages", owned.session),
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(window.to_string().contains(SECRET), "{window}");
    let _ = keys.admin;
    let _ = keys.acme_admin;
}

#[tokio::test]
async fn a_bound_key_supplies_its_agent_and_tenants_never_meet() {
    let (app, keys, owned) = fixture().await;
    let alice = Some(bearer(&keys.alice));
    // No agent_id anywhere: the key's agent.
    let recalled = assert_status(
        app.send_as(
            alice.as_deref(),
            Method::POST,
            "/tools/recall",
            Some(&json!({"query": "vault code"})),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(recalled.to_string().contains(&owned.memory), "{recalled}");
    // Naming itself is fine; naming another agent is 403 naming the field.
    assert_status(
        app.send_as(
            alice.as_deref(),
            Method::POST,
            "/tools/recall",
            Some(&json!({"agent_id": "alice", "query": "vault code"})),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_error(
        app.send_as(
            alice.as_deref(),
            Method::POST,
            "/tools/recall",
            Some(&json!({"agent_id": "bob", "query": "vault code"})),
        )
        .await,
        StatusCode::FORBIDDEN,
        "permission_denied",
        Some("agent_id"),
    )
    .await;
    // Answers name the agent as the client knows it, never the tenant-qualified id.
    let listed = assert_status(
        app.send_as(alice.as_deref(), Method::GET, "/v1/memories", None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(!listed.to_string().contains("acme/"), "{listed}");
    assert_eq!(listed["memories"][0]["agent_id"], "alice", "{listed}");

    // globex's alice is someone else: she stores her own and never sees acme's.
    let globex = Some(bearer(&keys.globex));
    assert_status(
        app.send_as(
            globex.as_deref(),
            Method::POST,
            "/tools/remember",
            Some(&json!({"agent_id": "alice", "content": "Globex alice likes the vault door painted red", "shared": true})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let theirs = assert_status(
        app.send_as(
            globex.as_deref(),
            Method::POST,
            "/tools/recall",
            Some(&json!({"agent_id": "alice", "query": "vault code door"})),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(!theirs.to_string().contains("4471"), "{theirs}");
    assert!(theirs.to_string().contains("painted red"), "{theirs}");
    // The shared pool is per tenant: acme's bob does not see globex's shared memory.
    let bob = assert_status(
        app.send_as(
            Some(&bearer(&keys.bob)),
            Method::POST,
            "/tools/recall",
            Some(&json!({"query": "vault door painted"})),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(!bob.to_string().contains("painted red"), "{bob}");
    // A tenant-wide key of acme may act as any acme agent (and sees alice's memory).
    let acme_admin = assert_status(
        app.send_as(
            Some(&bearer(&keys.acme_admin)),
            Method::GET,
            "/v1/memories?agent_id=alice",
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert!(acme_admin.to_string().contains("4471"), "{acme_admin}");
}

#[tokio::test]
async fn keys_are_managed_by_admins_shown_once_revoked_at_once_and_audited() {
    let (app, keys, _owned) = fixture().await;
    // The server admin makes a key for acme's carol.
    let created = assert_status(
        app.post(
            "/v1/admin/keys",
            &json!({"name": "carol's laptop", "tenant": "acme", "agent": "carol", "scopes": ["read", "write"]}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let secret = created["secret"].as_str().unwrap().to_string();
    let id = created["key"]["id"].as_str().unwrap().to_string();
    assert!(secret.starts_with(&format!("mnm_{id}_")), "{created}");
    assert_eq!(created["key"]["status"], "active");
    assert_eq!(created["key"]["agent"], "carol");
    let carol = Some(bearer(&secret));
    assert_status(
        app.send_as(
            carol.as_deref(),
            Method::POST,
            "/tools/remember",
            Some(&json!({"content": "carol was here"})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    // Lists never show a secret (nor its hash).
    let listed = assert_status(app.get("/v1/admin/keys?tenant=acme").await, StatusCode::OK).await;
    let text = listed.to_string();
    assert!(!text.contains(&secret[20..]), "{listed}");
    assert!(!text.contains("secret"), "{listed}");
    assert!(
        listed["keys"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["tenant"] == "acme"),
        "{listed}"
    );
    assert!(listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k["status"] == "revoked"));
    assert!(listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k["status"] == "expired"));

    // An admin of acme manages acme's keys only; globex's keys are not there for it.
    let acme_admin = Some(bearer(&keys.acme_admin));
    let acme_view = assert_status(
        app.send_as(acme_admin.as_deref(), Method::GET, "/v1/admin/keys", None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(
        acme_view["keys"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["tenant"] == "acme"),
        "{acme_view}"
    );
    assert_error(
        app.send_as(
            acme_admin.as_deref(),
            Method::POST,
            "/v1/admin/keys",
            Some(&json!({"tenant": "globex", "agent": "*", "scopes": ["admin"]})),
        )
        .await,
        StatusCode::FORBIDDEN,
        "permission_denied",
        None,
    )
    .await;
    let all = assert_status(app.get("/v1/admin/keys").await, StatusCode::OK).await;
    let globex_key = all["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["tenant"] == "globex")
        .expect("the server admin sees globex's key")["id"]
        .as_str()
        .unwrap()
        .to_string();
    let globex_revoke = app
        .send_as(
            acme_admin.as_deref(),
            Method::DELETE,
            &format!("/v1/admin/keys/{globex_key}"),
            None,
        )
        .await;
    let nonexistent = app
        .send_as(
            acme_admin.as_deref(),
            Method::DELETE,
            "/v1/admin/keys/abcdefabcdef",
            None,
        )
        .await;
    assert_eq!(globex_revoke.status(), StatusCode::NOT_FOUND);
    assert_eq!(nonexistent.status(), StatusCode::NOT_FOUND);
    assert_status(
        app.send_as(
            Some(&bearer(&keys.globex)),
            Method::GET,
            "/v1/memories?agent_id=x",
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;

    // Bad bodies are named.
    assert_error(
        app.post(
            "/v1/admin/keys",
            &json!({"agent": "carol", "scopes": ["root"]}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("scopes"),
    )
    .await;
    assert_error(
        app.post(
            "/v1/admin/keys",
            &json!({"agent": "carol", "scopes": ["read"], "expires_at": "2001-01-01T00:00:00Z"}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_argument",
        Some("expires_at"),
    )
    .await;

    // Revoked: the very next request is 401 saying so.
    assert_status(
        app.delete(&format!("/v1/admin/keys/{id}")).await,
        StatusCode::OK,
    )
    .await;
    let refused = assert_error(
        app.send_as(carol.as_deref(), Method::GET, "/v1/memories", None)
            .await,
        StatusCode::UNAUTHORIZED,
        "unauthenticated",
        None,
    )
    .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("revoked"),
        "{refused}"
    );

    // An admin action is audited too.
    assert_status(
        app.post("/v1/admin/archive", &json!({})).await,
        StatusCode::OK,
    )
    .await;
    // The audit log has the key's creation and revocation, the admin action and the
    // denials, with who.
    let audited = eventually(std::time::Duration::from_secs(10), || async {
        let log = assert_status(app.get("/v1/admin/audit?limit=200").await, StatusCode::OK).await;
        let entries = log["entries"].as_array().cloned().unwrap_or_default();
        let has = |action: &str, target: &str| {
            entries.iter().any(|e| {
                e["action"] == action && e["target"].as_str().is_some_and(|t| t.contains(target))
            })
        };
        has("key.create", &id)
            && has("key.revoke", &id)
            && entries.iter().any(|e| e["action"] == "admin.archive")
            && has("auth.denied", "/v1/memories")
    })
    .await;
    assert!(
        audited,
        "{}",
        app.get("/v1/admin/audit").await.text().await.unwrap()
    );
    // acme's admin reads acme's log only.
    let acme_log = assert_status(
        app.send_as(acme_admin.as_deref(), Method::GET, "/v1/admin/audit", None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(
        acme_log["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["tenant"] == "acme"),
        "{acme_log}"
    );
}

#[tokio::test]
async fn public_routes_answer_anyone_and_detail_needs_an_admin() {
    let (app, keys, _owned) = fixture().await;
    let anonymous = assert_status(
        app.send_as(None, Method::GET, "/health", None).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(anonymous["status"], "ok", "{anonymous}");
    assert!(
        anonymous.get("backends").is_none_or(Value::is_null),
        "{anonymous}"
    );
    let detailed = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert!(
        detailed["backends"].is_object() || detailed["backends"].is_array(),
        "{detailed}"
    );
    let as_alice = assert_status(
        app.send_as(Some(&bearer(&keys.alice)), Method::GET, "/health", None)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(
        as_alice.get("backends").is_none_or(Value::is_null),
        "{as_alice}"
    );
    assert_status(
        app.send_as(None, Method::GET, "/openapi.json", None).await,
        StatusCode::OK,
    )
    .await;
    let metrics = app.get("/metrics").await;
    assert_eq!(metrics.status(), StatusCode::OK);
    // An unknown route tells an anonymous caller nothing but 401.
    assert_eq!(
        app.send_as(None, Method::GET, "/v1/nothing-here", None)
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
    // /mcp and the proxy refuse a request without a key before anything else.
    for (method, path, body) in [
        (
            Method::POST,
            "/mcp",
            Some(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            ),
        ),
        (
            Method::POST,
            "/v1/chat/completions",
            Some(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})),
        ),
        (Method::GET, "/v1/models", None),
    ] {
        let response = app.send_as(None, method, path, body.as_ref()).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
}

#[tokio::test]
async fn public_metrics_opens_metrics_and_health_detail_to_anyone() {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.auth.mode = "keys".into();
    settings.auth.public_metrics = true;
    let app = spawn_with(settings, Some(temp)).await;
    assert_eq!(app.get("/metrics").await.status(), StatusCode::OK);
    let health = assert_status(app.get("/health").await, StatusCode::OK).await;
    assert!(!health["backends"].is_null(), "{health}");
    assert_eq!(
        app.get("/v1/memories?agent_id=a").await.status(),
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn without_keys_a_read_change_or_delete_by_id_must_name_the_owner() {
    let app = spawn_app().await;
    let id = app
        .remember("alice", &format!("Alice secret: {SECRET}"), json!({}))
        .await["memory"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for (method, path, body) in [
        (Method::GET, format!("/v1/memories/{id}"), None),
        (Method::GET, format!("/v1/memories/{id}/history"), None),
        (
            Method::PATCH,
            format!("/v1/memories/{id}"),
            Some(json!({"content": "x"})),
        ),
        (Method::DELETE, format!("/v1/memories/{id}"), None),
        (
            Method::POST,
            "/tools/memory_history".to_string(),
            Some(json!({"id": id})),
        ),
        (
            Method::POST,
            "/tools/forget".to_string(),
            Some(json!({"id": id})),
        ),
    ] {
        let response = app
            .send_as(None, method.clone(), &path, body.as_ref())
            .await;
        let body = assert_error(
            response,
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            Some("agent_id"),
        )
        .await;
        assert!(
            !body.to_string().contains("4471"),
            "{method} {path}: {body}"
        );
        // Naming another agent is the same not-found as an id that does not exist.
        let (other, body) = if method == Method::POST {
            (
                path.clone(),
                body_with_agent(body_of(&method, &id), "mallory"),
            )
        } else {
            (format!("{path}?agent_id=mallory"), body_of(&method, &id))
        };
        let response = app
            .send_as(None, method.clone(), &other, body.as_ref())
            .await;
        assert_error(response, StatusCode::NOT_FOUND, "not_found", None).await;
    }
    let kept = assert_status(
        app.get(&format!("/v1/memories/{id}?agent_id=alice")).await,
        StatusCode::OK,
    )
    .await;
    assert!(kept["content"].as_str().unwrap().contains(SECRET));
}

/// The body the ownership test sends for `method` (None for reads and deletes by path).
fn body_of(method: &Method, id: &str) -> Option<Value> {
    match *method {
        Method::PATCH => Some(json!({"content": "x"})),
        Method::POST => Some(json!({"id": id})),
        _ => None,
    }
}

/// `body` naming `agent`.
fn body_with_agent(body: Option<Value>, agent: &str) -> Option<Value> {
    body.map(|mut b| {
        b["agent_id"] = json!(agent);
        b
    })
}

#[tokio::test]
async fn a_network_address_without_keys_is_refused_at_start() {
    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.server.bind = "0.0.0.0:0".into();
    let error = match try_spawn_with(settings, Some(temp)).await {
        Ok(_) => panic!("a server without keys on 0.0.0.0 must not start"),
        Err(error) => format!("{error:#}"),
    };
    assert!(error.contains("auth.mode"), "{error}");

    let temp = tempfile::tempdir().unwrap();
    let mut settings = test_settings(temp.path());
    settings.server.bind = "0.0.0.0:0".into();
    settings.auth.mode = "keys".into();
    let app = try_spawn_with(settings, Some(temp))
        .await
        .expect("with keys it starts");
    app.stop().await;
}

#[tokio::test]
async fn a_key_past_its_request_rate_or_write_budget_gets_429_with_retry_after() {
    let (app, secrets) = spawn_with_keys_and(
        &[key("acme", Some("alice"), RW), key("acme", Some("bob"), RW)],
        |settings| {
            settings.auth.requests_per_window = 6;
            settings.auth.writes_per_window = 3;
            settings.auth.session_writes_per_hour = 2;
        },
    )
    .await;
    let alice = Some(bearer(&secrets[0]));
    // A batch of two and one more memory: the write budget of three is spent.
    assert_status(
        app.send_as(
            alice.as_deref(),
            Method::POST,
            "/tools/remember_batch",
            Some(&json!({"memories": [{"content": "one"}, {"content": "two"}]})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert_status(
        app.send_as(
            alice.as_deref(),
            Method::POST,
            "/tools/remember",
            Some(&json!({"content": "three"})),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let over = app
        .send_as(
            alice.as_deref(),
            Method::POST,
            "/tools/remember",
            Some(&json!({"content": "four"})),
        )
        .await;
    let retry_after: u64 = over.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    let body = assert_error(over, StatusCode::TOO_MANY_REQUESTS, "rate_limited", None).await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("writes_per_window"),
        "{body}"
    );
    // Reads still go, until the request rate (six per window) is spent.
    assert_status(
        app.send_as(alice.as_deref(), Method::GET, "/v1/memories", None)
            .await,
        StatusCode::OK,
    )
    .await;
    for _ in 0..2 {
        let listed = app
            .send_as(alice.as_deref(), Method::GET, "/v1/memories", None)
            .await;
        assert_eq!(listed.status(), StatusCode::OK);
    }
    let limited = app
        .send_as(alice.as_deref(), Method::GET, "/v1/memories", None)
        .await;
    assert!(limited.headers().contains_key("retry-after"));
    assert_error(limited, StatusCode::TOO_MANY_REQUESTS, "rate_limited", None).await;
    // Nothing over the budget was stored; bob's key has budgets of its own.
    let bob = Some(bearer(&secrets[1]));
    for n in 0..2 {
        assert_status(
            app.send_as(
                bob.as_deref(),
                Method::POST,
                "/v1/sessions/loop/messages",
                Some(&json!({"role": "user", "content": format!("turn {n}")})),
            )
            .await,
            StatusCode::CREATED,
        )
        .await;
    }
    // A session (task) has a write budget of its own: a runaway loop stops there.
    assert_error(
        app.send_as(
            bob.as_deref(),
            Method::POST,
            "/v1/sessions/loop/messages",
            Some(&json!({"role": "user", "content": "turn 3"})),
        )
        .await,
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        None,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_no_undocumented_answer_with_a_key() {
    let test = "schemathesis_finds_no_server_error_and_no_undocumented_answer_with_a_key";
    // Through the interpreter, so no console-script shim needs to be on PATH.
    let installed = tokio::process::Command::new("python3")
        .args(["-m", "schemathesis.cli", "--version"])
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if !installed {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install schemathesis (python3 -m pip install schemathesis)"
        );
        skipped(test, "pip install schemathesis");
        return;
    }
    let (app, secrets) = spawn_with_keys_and(&[key("acme", None, RW)], |settings| {
        settings.auth.requests_per_window = 0;
        settings.auth.writes_per_window = 0;
        settings.auth.session_writes_per_hour = 0;
    })
    .await;
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(600),
        tokio::process::Command::new("python3")
            .args(["-m", "schemathesis.cli", "run"])
            .arg(format!("{}/openapi.json", app.address))
            .args(["-H", &format!("Authorization: Bearer {}", secrets[0])])
            // The proxy's and MCP's payloads are OpenAI's and JSON-RPC's, described as
            // free-form objects: their own suites (proxy.rs, mcp.rs) drive them.
            .args(["--exclude-tag", "proxy", "--exclude-tag", "mcp"])
            .args([
                "--checks",
                "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
                "--phases",
                "examples,fuzzing",
                "-n",
                "25",
                "--seed",
                "16",
            ])
            .env("NO_COLOR", "1")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("schemathesis finishes within ten minutes")
    .expect("schemathesis runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The summary goes to the test's own stderr (visible with --nocapture and in CI logs).
    let summary: String = stdout
        .lines()
        .skip_while(|l| !l.contains("SUMMARY"))
        .collect::<Vec<_>>()
        .join("\n");
    {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "schemathesis with a key:\n{summary}");
    }
    assert!(
        output.status.success(),
        "schemathesis found failures:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn every_memory_records_which_key_surface_session_and_request_wrote_it() {
    let (app, secrets) = spawn_with_keys(&[key("acme", Some("alice"), RW)]).await;
    let key_id = secrets[0].split('_').nth(1).unwrap().to_string();
    let response = app
        .client
        .post(format!("{}/tools/remember", app.address))
        .bearer_auth(&secrets[0])
        .header("x-request-id", "req-42")
        .json(&json!({"content": "Provenance matters", "session_id": "s9", "metadata": {"mnemos_provenance": "forged"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "req-42");
    let stored = assert_status(response, StatusCode::CREATED).await;
    let provenance = &stored["memory"]["provenance"];
    assert_eq!(provenance["key_id"], key_id.as_str(), "{stored}");
    assert_eq!(provenance["surface"], "rest", "{stored}");
    assert_eq!(provenance["session_id"], "s9", "{stored}");
    assert_eq!(provenance["request_id"], "req-42", "{stored}");
    // Read back: the same, on every read.
    let id = stored["memory"]["id"].as_str().unwrap();
    let read = assert_status(
        app.send_as(
            Some(&bearer(&secrets[0])),
            Method::GET,
            &format!("/v1/memories/{id}"),
            None,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(read["provenance"], *provenance, "{read}");
    // Without a client id, one is made and answered.
    let made = app
        .send_as(
            Some(&bearer(&secrets[0])),
            Method::GET,
            "/v1/memories",
            None,
        )
        .await;
    assert_eq!(made.headers()["x-request-id"].len(), 36);
    // Refusals carry the request id too: before routing (no key, 401; a foreign Host,
    // 403) and after (an unknown route, 404).
    for (host, authorization, path, status) in [
        (None, None, "/v1/memories", StatusCode::UNAUTHORIZED),
        (
            Some("evil.example"),
            Some(bearer(&secrets[0])),
            "/health",
            StatusCode::FORBIDDEN,
        ),
        (
            None,
            Some(bearer(&secrets[0])),
            "/v1/nowhere",
            StatusCode::NOT_FOUND,
        ),
    ] {
        let mut request = app
            .client
            .get(format!("{}{path}", app.address))
            .header("x-request-id", "refused-1");
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(authorization) = authorization {
            request = request.header("authorization", authorization);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), status, "{path}");
        assert_eq!(response.headers()["x-request-id"], "refused-1", "{path}");
    }
    // extract_turn records its surface and session too.
    let mined = assert_status(
        app.send_as(
            Some(&bearer(&secrets[0])),
            Method::POST,
            "/tools/extract_turn",
            Some(
                &json!({"user": "I prefer green tea.", "assistant": "Noted.", "session_id": "s9"}),
            ),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        mined["stored"][0]["provenance"]["surface"], "rest",
        "{mined}"
    );
    assert_eq!(
        mined["stored"][0]["provenance"]["key_id"],
        key_id.as_str(),
        "{mined}"
    );
}
