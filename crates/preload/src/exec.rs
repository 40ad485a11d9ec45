//! The exec family: a new process image has no engine (with the library
//! or without it), so before the kernel replaces this one the engine
//! delivers what the program's closed connections still hold
//! (`process::before_exec`); the kernel would have delivered it after
//! the exec.  The variadic `execl`, `execlp` and `execle` cannot be
//! defined in Rust: glibc's call its internal execve, not this one.

use std::os::raw::{c_char, c_int};

/// # Safety
/// As execve(2).
#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    if !crate::guard::inside() {
        crate::process::before_exec();
    }
    // SAFETY: the caller's arguments.
    unsafe { crate::real::execve(path, argv, envp) }
}

/// # Safety
/// As execv(3).
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    if !crate::guard::inside() {
        crate::process::before_exec();
    }
    // SAFETY: the caller's arguments.
    unsafe { crate::real::execv(path, argv) }
}

/// # Safety
/// As execvp(3).
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    if !crate::guard::inside() {
        crate::process::before_exec();
    }
    // SAFETY: the caller's arguments.
    unsafe { crate::real::execvp(file, argv) }
}

/// # Safety
/// As execvpe(3).
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    if !crate::guard::inside() {
        crate::process::before_exec();
    }
    // SAFETY: the caller's arguments.
    unsafe { crate::real::execvpe(file, argv, envp) }
}

/// # Safety
/// As fexecve(3).
#[no_mangle]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    if !crate::guard::inside() {
        crate::process::before_exec();
    }
    // SAFETY: the caller's arguments.
    unsafe { crate::real::fexecve(fd, argv, envp) }
}
