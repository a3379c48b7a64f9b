//! BackgroundCognition: owns the cron scheduler that wakes the sleep cycle and the
//! nightly archival. Jobs only send `Tick` messages to this actor; the actor forwards
//! the work to the consolidator. Tests drive the same path with `Tick` directly.

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio_cron_scheduler::{Job, JobScheduler};

use super::consolidator::{ConsolidatorMsg, ConsolidatorRef};
use super::injected_fault;
use crate::error::MemoryError;

/// Handle to the BackgroundCognition actor.
pub type CognitionRef = ActorRef<CognitionMsg>;

/// Which scheduled job fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduledJob {
    /// The sleep cycle (consolidation of every agent).
    SleepCycle,
    /// Nightly archival of idle sessions.
    Archival,
}

/// Messages of the BackgroundCognition actor.
pub enum CognitionMsg {
    /// A scheduled job fired (sent by the cron scheduler, or by tests).
    Tick(ScheduledJob),
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct CognitionArgs {
    /// Run the schedules at all.
    pub enabled: bool,
    /// Cron expression (with seconds) of the sleep cycle.
    pub sleep_schedule: String,
    /// Cron expression (with seconds) of archival, in UTC.
    pub archival_schedule: String,
    /// Resolves the consolidator's current ref (it may have been restarted).
    pub consolidator: std::sync::Arc<dyn Fn() -> Option<ConsolidatorRef> + Send + Sync>,
}

/// The actor's state.
pub struct CognitionState {
    /// The running scheduler (None when disabled); shut down when the actor stops.
    scheduler: Option<JobScheduler>,
    /// Resolves the consolidator's current ref.
    consolidator: std::sync::Arc<dyn Fn() -> Option<ConsolidatorRef> + Send + Sync>,
}

/// The BackgroundCognition actor.
pub struct CognitionActor;

fn schedule_error(key: &str, error: impl std::fmt::Display) -> ActorProcessingErr {
    Box::new(MemoryError::invalid(
        key,
        format!("{key}: invalid cron schedule: {error}"),
    ))
}

/// Check that a cron expression (six or seven fields, seconds first) parses.
pub fn validate_schedule(key: &str, expression: &str) -> Result<(), MemoryError> {
    Job::new_async(expression, |_, _| Box::pin(async {}))
        .map(|_| ())
        .map_err(|e| MemoryError::invalid(key, format!("{key} = {expression:?} is not a cron schedule with seconds (e.g. \"0 */30 * * * *\"): {e}")))
}

impl Actor for CognitionActor {
    type Msg = CognitionMsg;
    type State = CognitionState;
    type Arguments = CognitionArgs;

    async fn pre_start(
        &self,
        myself: CognitionRef,
        args: CognitionArgs,
    ) -> Result<CognitionState, ActorProcessingErr> {
        let scheduler = if args.enabled {
            let scheduler = JobScheduler::new()
                .await
                .map_err(|e| schedule_error("cognition.schedule", e))?;
            for (key, expression, job) in [
                (
                    "cognition.schedule",
                    args.sleep_schedule.clone(),
                    ScheduledJob::SleepCycle,
                ),
                (
                    "archival.schedule",
                    args.archival_schedule.clone(),
                    ScheduledJob::Archival,
                ),
            ] {
                let target = myself.clone();
                let cron = Job::new_async(expression.as_str(), move |_, _| {
                    let target = target.clone();
                    Box::pin(async move {
                        let _ = target.cast(CognitionMsg::Tick(job));
                    })
                })
                .map_err(|e| schedule_error(key, e))?;
                scheduler
                    .add(cron)
                    .await
                    .map_err(|e| schedule_error(key, e))?;
            }
            scheduler
                .start()
                .await
                .map_err(|e| schedule_error("cognition.schedule", e))?;
            Some(scheduler)
        } else {
            None
        };
        Ok(CognitionState {
            scheduler,
            consolidator: args.consolidator,
        })
    }

    async fn post_stop(
        &self,
        _myself: CognitionRef,
        state: &mut CognitionState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(mut scheduler) = state.scheduler.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), scheduler.shutdown()).await;
        }
        Ok(())
    }

    #[tracing::instrument(name = "cognition", skip_all)]
    async fn handle(
        &self,
        _myself: CognitionRef,
        message: CognitionMsg,
        state: &mut CognitionState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            CognitionMsg::Tick(job) => {
                let Some(consolidator) = (state.consolidator)() else {
                    tracing::warn!(?job, "consolidator is restarting; tick skipped");
                    return Ok(());
                };
                let message = match job {
                    ScheduledJob::SleepCycle => ConsolidatorMsg::ConsolidateAll {
                        trigger: "schedule".into(),
                        reply: None,
                    },
                    ScheduledJob::Archival => ConsolidatorMsg::Archive {
                        trigger: "archival".into(),
                        reply: None,
                    },
                };
                tracing::info!(?job, "scheduled job fired");
                let _ = consolidator.cast(message);
            }
            CognitionMsg::InjectFault => return Err(injected_fault("cognition")),
        }
        Ok(())
    }
}
