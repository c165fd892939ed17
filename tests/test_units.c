/* Runs the CUnit suites of ljmpd's modules; the exit status counts failures. */
#include <CUnit/Basic.h>

#include "test_support.h"
#include "test_units.h"

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    register_feed_tests();
    register_subscription_tests();
    register_snapshot_tests();
    register_session_tests();
    register_history_tests();
    register_series_tests();
    register_marks_tests();
    register_recorder_tests();
    return test_run_all();
}
