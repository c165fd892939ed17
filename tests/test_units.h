/* The suites of ljmpd's modules, run without sockets or a daemon. */
#ifndef TEST_UNITS_H
#define TEST_UNITS_H

void register_feed_tests(void);
void register_subscription_tests(void);
void register_snapshot_tests(void);
void register_session_tests(void);
void register_history_tests(void);
void register_series_tests(void);
void register_marks_tests(void);
void register_recorder_tests(void);

#endif
