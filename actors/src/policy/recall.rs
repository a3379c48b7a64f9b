//! Recall's decisions after fusion (pure): how deep each retriever fetches, which
//! candidates a request may see, and the re-rank formula.
//!
//! ```text
//! relevance = fused score / best possible fused score          (0..1)
//! score     = relevance
//!           × hinted_time_boost        when it occurred in a period the question names
//!           × (importance_floor + importance_weight · importance)
//!           × (retention_floor  + retention_weight  · retention)
//!           × session_boost            when it is in the request's session
//!           × project_boost            when it is in the request's project
//!           × shared_factor            when it is another agent's shared memory
//! ```
//!
//! With `rerank` off the score is the relevance alone. [`RerankWeights::default`]
//! holds the values every measurement in `docs/` was made with.
//!
//! The score a caller sees is [`reported_score`] of that product: equal to it up to
//! [`SCORE_KNEE`], then compressed smoothly toward 1, so boosts and graph extras never
//! push a score past 1 and the order is kept. A candidate that scored 0 (found by no
//! retriever's evidence) is never returned ([`qualifies`]).

use std::collections::HashSet;

use crate::model::{AgentId, Memory, MemoryId, MemoryStatus, MemoryType, SessionId};
use crate::policy::fusion::{NeighbourLink, RankedList, Retriever};
use crate::policy::time::TimeRange;
use crate::projects::ProjectId;
use crate::store::Link;

/// The re-rank's multipliers (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RerankWeights {
    /// Multiplier of a memory that occurred in a period the question names ("in May").
    pub hinted_time_boost: f64,
    /// Importance factor at importance 0; the factor reaches `floor + weight` at 1.
    pub importance_floor: f64,
    /// How much importance adds to its factor.
    pub importance_weight: f64,
    /// Retention factor at retention 0.
    pub retention_floor: f64,
    /// How much retention adds to its factor.
    pub retention_weight: f64,
    /// Multiplier of a memory in the request's session.
    pub session_boost: f64,
    /// Multiplier of a memory in the request's project.
    pub project_boost: f64,
    /// Multiplier of another agent's shared memory (an agent's own memories come first).
    pub shared_factor: f64,
}

impl Default for RerankWeights {
    fn default() -> Self {
        Self {
            hinted_time_boost: 1.25,
            importance_floor: 0.85,
            importance_weight: 0.15,
            retention_floor: 0.9,
            retention_weight: 0.1,
            session_boost: 1.1,
            project_boost: 1.1,
            shared_factor: 0.9,
        }
    }
}

/// What a memory's final score depends on besides its fused relevance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HitContext {
    /// It occurred in the period the question names.
    pub in_hinted_time: bool,
    /// Its importance (0..1).
    pub importance: f32,
    /// Its retention at recall time (0..1).
    pub retention: f64,
    /// It belongs to the request's session.
    pub in_session: bool,
    /// It belongs to the request's project (and agent).
    pub in_project: bool,
    /// It is the asking agent's own memory.
    pub own: bool,
}

impl RerankWeights {
    /// The final score of a candidate with `relevance` (0..1) in `context`.
    pub fn score(&self, relevance: f64, context: &HitContext) -> f64 {
        let boost = |on: bool, factor: f64| if on { factor } else { 1.0 };
        relevance
            * boost(context.in_hinted_time, self.hinted_time_boost)
            * (self.importance_floor + self.importance_weight * f64::from(context.importance))
            * (self.retention_floor + self.retention_weight * context.retention)
            * boost(context.in_session, self.session_boost)
            * boost(context.in_project, self.project_boost)
            * boost(!context.own, self.shared_factor)
    }
}

/// Where [`reported_score`] starts compressing: below it a score is the product itself.
pub const SCORE_KNEE: f64 = 0.8;

/// The score on 0..1 a caller sees for a re-ranked `score` (≥ 0): the identity up to
/// [`SCORE_KNEE`], then `knee + (1 − knee)·(1 − e^{−(s − knee)/(1 − knee)})`, which is
/// continuous, has slope 1 at the knee, rises strictly and stays below 1. Monotone, so
/// the ranking is unchanged.
pub fn reported_score(score: f64) -> f64 {
    if !score.is_finite() || score <= 0.0 {
        return 0.0;
    }
    if score <= SCORE_KNEE {
        return score;
    }
    let room = 1.0 - SCORE_KNEE;
    SCORE_KNEE + room * (1.0 - (-(score - SCORE_KNEE) / room).exp())
}

/// Whether a re-ranked candidate is worth returning at all: it needs some evidence (a
/// positive score); padding the limit with unrelated memories helps nobody.
pub fn qualifies(score: f64) -> bool {
    score.is_finite() && score > 1e-9
}

/// How many candidates each retriever fetches for `limit` results: a time, tag or type
/// filter discards candidates afterwards, so a filtered request fetches deeper.
pub fn fetch_depth(limit: usize, filtered: bool) -> usize {
    if filtered {
        (limit * 10 + 100).min(2000)
    } else {
        (limit * 3 + 20).min(1000)
    }
}

/// The best possible fused score (a perfect match of every main retriever), which puts
/// relevance on 0..1: the weights of the vector, keyword and (when the request names a
/// period) time retrievers. Graph, working, feedback, entity and facts scores are extras
/// on top.
pub fn best_fused_score(lists: &[RankedList], has_time_window: bool) -> f64 {
    lists
        .iter()
        .filter(|l| l.retriever != Retriever::Time || has_time_window)
        .filter(|l| {
            !matches!(
                l.retriever,
                Retriever::Graph
                    | Retriever::Working
                    | Retriever::Feedback
                    | Retriever::Entity
                    | Retriever::Facts
            )
        })
        .map(|l| l.weight)
        .sum::<f64>()
        .max(f64::EPSILON)
}

/// The weight of the facts retriever (recall as of a time): a memory stating a fact
/// that held then about what the question names counts as much as a perfect vector
/// match, so what was true at the time comes before what was said about it later.
pub const HELD_FACT_WEIGHT: f64 = 1.0;

/// Who asks and what they asked for: decides which candidates they may see.
#[derive(Debug, Clone, Copy)]
pub struct Audience<'a> {
    /// The asking agent.
    pub agent: &'a AgentId,
    /// Whether other agents' shared memories are wanted.
    pub include_shared: bool,
    /// The project in focus, if any.
    pub project: Option<&'a ProjectId>,
    /// The session in focus, if any.
    pub session: Option<&'a SessionId>,
    /// Only these types (empty: all).
    pub types: &'a [MemoryType],
    /// Only memories with one of these tags (empty: any).
    pub tags: &'a [String],
    /// Only memories that occurred in this range.
    pub time_range: Option<TimeRange>,
    /// Recall as of this instant or period: only memories that had happened by its end,
    /// and memories no longer active are seen when they are in `history`.
    pub as_of: Option<TimeRange>,
    /// Superseded or stale memories that stated a fact holding at `as_of` (what the
    /// memories said then): admitted although no longer active.
    pub history: &'a HashSet<MemoryId>,
}

impl Audience<'_> {
    /// The memory belongs to the project in focus (and to the asking agent).
    pub fn in_project(&self, memory: &Memory) -> bool {
        self.project.is_some()
            && memory.agent_id == *self.agent
            && memory.project_id.as_ref() == self.project
    }

    /// The memory may be returned: visible to this agent (its own, or shared when shared
    /// memories are wanted; an isolated project's memories only inside that project) and
    /// active (or, as of a time, in `history`) and matching the type, tag and time
    /// filters, and happened by `as_of`'s end. `isolated` holds the isolated
    /// (owner, project) pairs among the candidates.
    pub fn admits(&self, memory: &Memory, isolated: &HashSet<(AgentId, ProjectId)>) -> bool {
        let walled_off = !self.in_project(memory)
            && memory
                .project_id
                .as_ref()
                .is_some_and(|p| isolated.contains(&(memory.agent_id.clone(), p.clone())));
        // The shared pool is per tenant: another tenant's shared memory is never seen.
        let visible = !walled_off
            && (memory.agent_id == *self.agent
                || (self.include_shared
                    && memory.shared
                    && memory.agent_id.same_tenant(self.agent)));
        let current = memory.status == MemoryStatus::Active
            || (self.as_of.is_some()
                && matches!(
                    memory.status,
                    MemoryStatus::Superseded | MemoryStatus::Stale
                )
                && self.history.contains(&memory.id));
        let happened = self.as_of.is_none_or(|at| memory.occurred_at < at.end);
        let wanted = current
            && happened
            && (self.types.is_empty() || self.types.contains(&memory.memory_type))
            && (self.tags.is_empty() || memory.tags.iter().any(|t| self.tags.contains(t)))
            && self
                .time_range
                .is_none_or(|r| r.contains(memory.occurred_at));
        visible && wanted
    }

    /// The memory belongs to the session in focus.
    pub fn in_session(&self, memory: &Memory) -> bool {
        self.session.is_some() && memory.session_id.as_ref() == self.session
    }
}

/// The links recall spreads relevance along: each association touching a seed (weighted
/// by its strength; a `supersedes` edge leads to an outdated memory and is skipped), and
/// each (seed, session neighbour) pair at full weight.
pub fn neighbour_links(
    seeds: &[MemoryId],
    edges: &[Link],
    in_session: Vec<(MemoryId, MemoryId)>,
) -> Vec<NeighbourLink> {
    let mut links: Vec<NeighbourLink> = Vec::new();
    for seed in seeds {
        for edge in edges {
            let other = if edge.from_id == *seed {
                &edge.to_id
            } else if edge.to_id == *seed {
                &edge.from_id
            } else {
                continue;
            };
            if edge.relation != "supersedes" {
                links.push(NeighbourLink {
                    seed: seed.clone(),
                    neighbour: other.clone(),
                    weight: f64::from(edge.weight).clamp(0.0, 1.0),
                });
            }
        }
    }
    links.extend(
        in_session
            .into_iter()
            .map(|(seed, neighbour)| NeighbourLink {
                seed,
                neighbour,
                weight: 1.0,
            }),
    );
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_scores_stay_in_zero_to_one_and_keep_the_order() {
        assert_eq!(reported_score(0.0), 0.0);
        assert_eq!(reported_score(-1.0), 0.0);
        assert_eq!(reported_score(f64::NAN), 0.0);
        assert_eq!(reported_score(0.5), 0.5);
        assert_eq!(reported_score(SCORE_KNEE), SCORE_KNEE);
        let mut previous = 0.0;
        for step in 1..=400 {
            let raw = f64::from(step) * 0.01;
            let shown = reported_score(raw);
            assert!(shown > previous, "{raw} -> {shown} not above {previous}");
            assert!(shown < 1.0, "{raw} -> {shown}");
            previous = shown;
        }
        // The 1.85 an issue saw is shown just under 1; continuous at the knee.
        assert!(reported_score(1.85) > 0.99);
        assert!((reported_score(SCORE_KNEE + 1e-9) - SCORE_KNEE).abs() < 1e-8);
    }

    #[test]
    fn a_candidate_without_evidence_does_not_qualify() {
        assert!(!qualifies(0.0));
        assert!(!qualifies(f64::NAN));
        assert!(qualifies(0.01));
    }
    use crate::testing::memory_fixture;

    #[test]
    fn neighbour_links_follow_associations_and_sessions_but_not_supersedes() {
        let id = |s: &str| crate::model::MemoryId(s.to_string());
        let link = |from: &str, to: &str, relation: &str, weight: f32| crate::store::Link {
            from_id: id(from),
            to_id: id(to),
            relation: relation.to_string(),
            weight,
        };
        let edges = [
            link("s1", "a", "related_to", 0.5),
            link("b", "s1", "related_to", 0.25),
            link("s1", "old", "supersedes", 1.0),
            link("x", "y", "related_to", 1.0),
        ];
        let links = neighbour_links(&[id("s1")], &edges, vec![(id("s1"), id("next"))]);
        let found: Vec<(&str, &str, f64)> = links
            .iter()
            .map(|l| (l.seed.0.as_str(), l.neighbour.0.as_str(), l.weight))
            .collect();
        assert_eq!(
            found,
            [("s1", "a", 0.5), ("s1", "b", 0.25), ("s1", "next", 1.0)]
        );
    }

    fn context() -> HitContext {
        HitContext {
            in_hinted_time: false,
            importance: 0.5,
            retention: 1.0,
            in_session: false,
            in_project: false,
            own: true,
        }
    }

    #[test]
    fn the_rerank_formula_multiplies_its_named_factors() {
        let w = RerankWeights::default();
        let base = w.score(1.0, &context());
        assert!((base - (0.85 + 0.15 * 0.5) * 1.0).abs() < 1e-12);
        let hinted = w.score(
            1.0,
            &HitContext {
                in_hinted_time: true,
                ..context()
            },
        );
        assert!((hinted / base - 1.25).abs() < 1e-12);
        let shared = w.score(
            1.0,
            &HitContext {
                own: false,
                ..context()
            },
        );
        assert!((shared / base - 0.9).abs() < 1e-12);
        let faded = w.score(
            1.0,
            &HitContext {
                retention: 0.0,
                ..context()
            },
        );
        assert!((faded / base - 0.9).abs() < 1e-12);
        let focused = w.score(
            0.5,
            &HitContext {
                in_session: true,
                in_project: true,
                ..context()
            },
        );
        assert!((focused / base - 0.5 * 1.1 * 1.1).abs() < 1e-12);
    }

    #[test]
    fn filters_fetch_deeper_within_bounds() {
        assert_eq!(fetch_depth(10, false), 50);
        assert_eq!(fetch_depth(10, true), 200);
        assert_eq!(fetch_depth(500, false), 1000);
        assert_eq!(fetch_depth(500, true), 2000);
    }

    #[test]
    fn relevance_is_put_on_the_main_retrievers_weights() {
        let list = |retriever, weight| RankedList {
            retriever,
            weight,
            hits: Vec::new(),
        };
        let lists = [
            list(Retriever::Vector, 0.6),
            list(Retriever::Keyword, 0.4),
            list(Retriever::Time, 0.25),
            list(Retriever::Working, 0.5),
        ];
        assert!((best_fused_score(&lists, false) - 1.0).abs() < 1e-12);
        assert!((best_fused_score(&lists, true) - 1.25).abs() < 1e-12);
        assert_eq!(best_fused_score(&[], false), f64::EPSILON);
    }

    #[test]
    fn an_isolated_project_is_seen_only_from_inside_it() {
        let alice = AgentId::parse("alice").unwrap();
        let bob = AgentId::parse("bob").unwrap();
        let vault = ProjectId::parse("vault").unwrap();
        let mut secret = memory_fixture("alice", "vault code", chrono::Utc::now());
        secret.project_id = Some(vault.clone());
        let isolated: HashSet<(AgentId, ProjectId)> = [(alice.clone(), vault.clone())].into();
        let outside = Audience {
            agent: &alice,
            include_shared: true,
            project: None,
            session: None,
            types: &[],
            tags: &[],
            time_range: None,
            as_of: None,
            history: &HashSet::new(),
        };
        assert!(!outside.admits(&secret, &isolated));
        let inside = Audience {
            project: Some(&vault),
            ..outside
        };
        assert!(inside.admits(&secret, &isolated));
        assert!(inside.admits(&secret, &HashSet::new()));
        let mut shared = memory_fixture("bob", "shared note", chrono::Utc::now());
        shared.shared = true;
        assert!(outside.admits(&shared, &isolated));
        let private = Audience {
            include_shared: false,
            ..outside
        };
        assert!(!private.admits(&shared, &isolated));
        let bobs = Audience {
            agent: &bob,
            ..outside
        };
        assert!(!bobs.admits(&secret, &HashSet::new()), "not shared");
        let acme = crate::model::TenantId::parse("acme").unwrap();
        let mut foreign = memory_fixture("bob", "shared elsewhere", chrono::Utc::now());
        foreign.agent_id = AgentId::qualified(Some(&acme), &bob);
        foreign.shared = true;
        assert!(
            !outside.admits(&foreign, &isolated),
            "another tenant's shared pool is not this one's"
        );
        let mut archived = memory_fixture("alice", "gone", chrono::Utc::now());
        archived.status = MemoryStatus::Archived;
        assert!(!outside.admits(&archived, &isolated));
    }

    #[test]
    fn as_of_a_time_sees_what_had_happened_and_the_history_that_held_then() {
        let alice = AgentId::parse("alice").unwrap();
        let march = chrono::DateTime::parse_from_rfc3339("2023-03-15T00:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let day = chrono::Duration::days(1);
        let mut lisbon = memory_fixture("alice", "Alice lives in Lisbon", march - day * 60);
        lisbon.status = MemoryStatus::Superseded;
        let berlin = memory_fixture("alice", "Alice moved to Berlin", march + day * 60);
        let mut porto = memory_fixture("alice", "Alice lived in Porto", march - day * 900);
        porto.status = MemoryStatus::Superseded;
        let history: HashSet<MemoryId> = [lisbon.id.clone()].into();
        let now = Audience {
            agent: &alice,
            include_shared: true,
            project: None,
            session: None,
            types: &[],
            tags: &[],
            time_range: None,
            as_of: None,
            history: &history,
        };
        assert!(!now.admits(&lisbon, &HashSet::new()), "superseded today");
        assert!(now.admits(&berlin, &HashSet::new()));
        let then = Audience {
            as_of: Some(TimeRange {
                start: march,
                end: march + chrono::Duration::microseconds(1),
            }),
            ..now
        };
        assert!(then.admits(&lisbon, &HashSet::new()), "it held in March");
        assert!(!then.admits(&berlin, &HashSet::new()), "not yet said");
        assert!(!then.admits(&porto, &HashSet::new()), "no longer held");
        let mut archived = lisbon.clone();
        archived.status = MemoryStatus::Archived;
        assert!(
            !then.admits(&archived, &HashSet::new()),
            "forgotten is gone"
        );
    }
}
