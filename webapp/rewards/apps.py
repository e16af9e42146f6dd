from django.apps import AppConfig


class RewardsConfig(AppConfig):
    name = "webapp.rewards"
    label = "rewards"

    def ready(self) -> None:
        from webapp.accounts.permissions import Need
        from webapp.common.seed import register_seeder
        from webapp.domains import hooks as domain_hooks
        from webapp.rewards import jobs, selectors
        from webapp.rewards.services import rubrics_follow_profile, rubrics_seed_builtin
        from webapp.trajectories import bulk, gdi, hooks

        jobs.register()
        register_seeder("rubrics", rubrics_seed_builtin)
        bulk.register(
            bulk.BulkAction("score", "Score selected", "rewards:score", Need.OPERATE, "post", 10)
        )
        hooks.register_step_rewards(selectors.step_rewards_for_diff)
        gdi.register_reward_source(selectors.gdi_rewards)
        domain_hooks.register_profile_saved(rubrics_follow_profile)
