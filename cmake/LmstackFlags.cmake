# Compiler flags. The binary targets x86-64-v3 (AVX2+FMA+F16C) as its floor; code for newer
# instruction sets lives in files named *_avx512.cc / *_amx.cc, compiled with those flags
# alone and called only after cpu_features() says the machine and OS support them.
set(LMSTACK_BASE_ARCH_FLAGS -march=x86-64-v3 -mtune=generic)
# No -mavx512fp16: no code uses FP16 arithmetic, and with it GCC emits AVX512-FP16 moves
# (vmovw for _cvtsh_ss) that fault on AVX-512 CPUs without FP16 (this one: bf16 + vnni only).
set(LMSTACK_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16
    -mavx512vnni
    # GCC 12 warns inside its own avx512fintrin.h (_mm512_undefined_*): a false positive.
    -Wno-uninitialized -Wno-maybe-uninitialized)
set(LMSTACK_AMX_FLAGS ${LMSTACK_AVX512_FLAGS} -mamx-tile -mamx-bf16 -mamx-int8)

function(lmstack_apply_flags target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter
      -Wnon-virtual-dtor -Wimplicit-fallthrough ${LMSTACK_BASE_ARCH_FLAGS}
      # GCC 12 -O3 false positives inside std::string (GCC PR 105329, PR 105651).
      -Wno-restrict>)
  if(LMSTACK_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")  # the fuzz preset; GCC-only -Wno-* names
    target_compile_options(${target} PRIVATE -Wno-unknown-warning-option)
  endif()
  if(LMSTACK_FUZZ)  # coverage for libFuzzer in every layer; fuzz/ links -fsanitize=fuzzer
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link,address,undefined
      -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(LMSTACK_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined
      -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()

# Per-file instruction-set flags chosen by the file name suffix.
function(lmstack_apply_isa_flags)
  foreach(src IN LISTS ARGN)
    if(src MATCHES "_amx\\.cc$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${LMSTACK_AMX_FLAGS}")
    elseif(src MATCHES "_avx512[a-z0-9_]*\\.cc$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${LMSTACK_AVX512_FLAGS}")
    endif()
  endforeach()
endfunction()
