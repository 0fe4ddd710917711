from forgetting.instances.tasks import per_repository, read_id_file, repository_of, stratified_sample


def test_shipped_task_list_is_the_documented_seeded_stratified_sample(repo_root):
    pool = read_id_file(repo_root / "resources/tasks/swe-bench-verified-all.txt", key="pool")
    shipped = read_id_file(repo_root / "resources/tasks/swe-bench-verified-100.txt", key="shipped")
    assert len(pool) == 500
    assert shipped == stratified_sample(pool, 100, 20250101)
    assert set(shipped) <= set(pool)


def test_sample_is_proportional_per_repository(repo_root):
    pool = read_id_file(repo_root / "resources/tasks/swe-bench-verified-all.txt", key="pool")
    sample = stratified_sample(pool, 100, 7)
    counts, total = per_repository(sample), per_repository(pool)
    for repo, n in counts.items():
        assert abs(n - 100 * total[repo] / 500) < 1
    assert counts["django/django"] == 46


def test_sample_does_not_depend_on_input_order_and_changes_with_seed():
    pool = [f"o__r{i % 3}-{i}" for i in range(60)]
    assert stratified_sample(pool, 10, 1) == stratified_sample(list(reversed(pool)), 10, 1)
    assert stratified_sample(pool, 10, 1) != stratified_sample(pool, 10, 2)
    assert repository_of("django__django-11099") == "django/django"
