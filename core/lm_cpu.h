/* Whether this CPU's BMI2 (PEXT, PDEP) and AVX2 are there and fast. */
/* Shared by the core's ULEB decoder and the VM's encoder (luajit-patch
 * copies this file). */
#ifndef LM_CPU_H
#define LM_CPU_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LM_HAVE_BMI2 1

/*
 * BMI1 and BMI2 (BLSMSK, PEXT, PDEP), and fast: Intel's CPUs and AMD's
 * from family 19h on.  AMD's families 15h and 17h, and Hygon's (17h's
 * design), run PEXT and PDEP as microcode, slower than the shifts they
 * replace, so those and other vendors keep the portable paths.
 */
static inline int lm_bmi2_is_fast(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("bmi") || !__builtin_cpu_supports("bmi2"))
        return 0;
    if (__builtin_cpu_is("intel"))
        return 1;
    return __builtin_cpu_is("amd") && !__builtin_cpu_is("amdfam15h") &&
           !__builtin_cpu_is("amdfam17h");
}

static inline int lm_avx2_is_there(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}
#else
static inline int lm_bmi2_is_fast(void)
{
    return 0;
}

static inline int lm_avx2_is_there(void)
{
    return 0;
}
#endif

#endif
