//! BackgroundCognition: owns the tokio-cron-scheduler `JobScheduler` that wakes the
//! sleep cycle and archival.
//!
//! Each job is armed as a one-shot for its next firing, computed by
//! [`Schedule::next_after`] in the job's time zone; when it fires it only sends
//! `Tick { job, slot }` to this actor, which forwards the work to the consolidator
//! (where the lease is claimed) and arms the next firing. Computing every firing
//! afresh keeps "03:00 local" at 03:00 local across daylight-saving changes, which a
//! cron job with a captured UTC offset would not. Tests send `Tick` directly.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio_cron_scheduler::{Job, JobScheduler};

use super::consolidator::ConsolidatorHandle;
pub use super::consolidator::ScheduledJob;
use super::injected_fault;
use crate::clock::Clock;
use crate::error::MemoryError;
use crate::policy::schedule::Schedule;
use crate::supervisor::InjectedFault;

/// Ref of the BackgroundCognition actor.
pub type CognitionRef = ActorRef<CognitionMsg>;

/// Messages of the BackgroundCognition actor.
pub enum CognitionMsg {
    /// A scheduled job fired for its firing `slot` (sent by the scheduler, or by tests).
    Tick {
        /// Which job.
        job: ScheduledJob,
        /// The scheduled instant of this firing.
        slot: DateTime<Utc>,
    },
    /// Test hook: fail the actor as if its state were broken.
    InjectFault,
}

impl From<InjectedFault> for CognitionMsg {
    fn from(_: InjectedFault) -> Self {
        CognitionMsg::InjectFault
    }
}

/// Start-up arguments (kept by the supervisor and reused on restart).
#[derive(Clone)]
pub struct CognitionArgs {
    /// Run the schedules at all.
    pub enabled: bool,
    /// When the sleep cycle fires.
    pub sleep_schedule: Schedule,
    /// When archival fires.
    pub archival_schedule: Schedule,
    /// Time source for computing firings.
    pub clock: Arc<dyn Clock>,
    /// The consolidator, which claims each firing's lease and runs the job.
    pub consolidator: ConsolidatorHandle,
}

/// The actor's state.
pub struct CognitionState {
    /// The running scheduler (None when disabled); shut down when the actor stops.
    scheduler: Option<JobScheduler>,
    /// Schedules, clock and the consolidator lookup.
    args: CognitionArgs,
    /// The firing currently armed per job: only that firing's tick arms the next one
    /// (a tick sent by a test or the CLI does not add a second chain).
    armed: std::collections::HashMap<ScheduledJob, DateTime<Utc>>,
}

/// The BackgroundCognition actor.
#[derive(Clone)]
pub struct CognitionActor;

fn schedule_error(error: impl std::fmt::Display) -> ActorProcessingErr {
    Box::new(MemoryError::unavailable(format!(
        "the job scheduler failed: {error}"
    )))
}

impl CognitionState {
    fn schedule(&self, job: ScheduledJob) -> &Schedule {
        match job {
            ScheduledJob::SleepCycle => &self.args.sleep_schedule,
            ScheduledJob::Archival => &self.args.archival_schedule,
        }
    }

    /// Arm a one-shot job for the first firing of `job` after `after`.
    async fn arm(
        &mut self,
        myself: &CognitionRef,
        job: ScheduledJob,
        after: DateTime<Utc>,
    ) -> Result<(), ActorProcessingErr> {
        let Some(scheduler) = &self.scheduler else {
            return Ok(());
        };
        let Some(slot) = self.schedule(job).next_after(after) else {
            tracing::warn!(job = job.name(), "schedule never fires again");
            return Ok(());
        };
        let wait = (slot - self.args.clock.now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        let target = myself.clone();
        let one_shot =
            Job::new_one_shot_at_instant_async(std::time::Instant::now() + wait, move |_, _| {
                let target = target.clone();
                Box::pin(async move {
                    let _ = target.cast(CognitionMsg::Tick { job, slot });
                })
            })
            .map_err(schedule_error)?;
        scheduler.add(one_shot).await.map_err(schedule_error)?;
        self.armed.insert(job, slot);
        tracing::debug!(job = job.name(), %slot, "next firing armed");
        Ok(())
    }
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
            let scheduler = JobScheduler::new().await.map_err(schedule_error)?;
            scheduler.start().await.map_err(schedule_error)?;
            Some(scheduler)
        } else {
            None
        };
        let mut state = CognitionState {
            scheduler,
            args,
            armed: Default::default(),
        };
        let now = state.args.clock.now();
        for job in [ScheduledJob::SleepCycle, ScheduledJob::Archival] {
            state.arm(&myself, job, now).await?;
        }
        Ok(state)
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
        myself: CognitionRef,
        message: CognitionMsg,
        state: &mut CognitionState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            CognitionMsg::Tick { job, slot } => {
                tracing::info!(job = job.name(), %slot, "scheduled job fired");
                if !state.args.consolidator.fire(job, slot) {
                    tracing::warn!(
                        job = job.name(),
                        "consolidator is restarting; firing skipped"
                    )
                }
                // The armed firing arms the next one, after this slot.
                if state.armed.get(&job) == Some(&slot) {
                    let after = slot.max(state.args.clock.now());
                    state.arm(&myself, job, after).await?;
                }
            }
            CognitionMsg::InjectFault => return Err(injected_fault("cognition")),
        }
        Ok(())
    }
}
