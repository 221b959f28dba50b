! ceiling_region.f90 - name a part of a Fortran program on `ceiling trace`'s timeline.
!
!     use ceiling_region
!     call ceiling_region_begin("checkpoint")
!     call write_checkpoint()
!     call ceiling_region_end("checkpoint")
!
! Compile this file with the program (gfortran -c ceiling_region.f90; `python3 -c "import
! ceiling.region as r; print(r.include_dir())"` says where it is). Each begin/end pair becomes a
! slice named "checkpoint" on the calling thread's track (regions nest; trailing blanks are not
! part of the name). The work is done by ceiling's interposer (libceiling_interpose.so, which
! `ceiling trace` preloads); its two functions are looked up once with dlsym, so a program built
! with this module links and runs without ceiling, where each call does nothing. The C header
! region.h refers to the same functions.
!
!     call ceiling_work(2.0d0 * n, 24.0d0 * n)   ! flops done, bytes moved to and from memory
!
! states the work the program did, so that `ceiling profile` places it on this node's roofline
! (summed over threads, processes and MPI ranks; state it before MPI_Finalize). Any real kind.
module ceiling_region
    use, intrinsic :: iso_c_binding, only: c_associated, c_char, c_double, c_f_procpointer, c_funptr, &
                                           c_null_char, c_null_funptr, c_null_ptr, c_ptr
    implicit none
    private
    public :: ceiling_region_begin, ceiling_region_end, ceiling_work

    interface ceiling_work
        module procedure work_r4, work_r8
    end interface ceiling_work

    interface
        ! RTLD_DEFAULT is the null handle in glibc and musl: every object loaded in the process
        function c_dlsym(handle, symbol) bind(c, name="dlsym") result(address)
            import :: c_char, c_funptr, c_ptr
            type(c_ptr), value :: handle
            character(kind=c_char), dimension(*), intent(in) :: symbol
            type(c_funptr) :: address
        end function c_dlsym
    end interface

    abstract interface
        subroutine region_fn(name) bind(c)
            import :: c_char
            character(kind=c_char), dimension(*), intent(in) :: name
        end subroutine region_fn
        subroutine work_fn(flops, bytes) bind(c)
            import :: c_double
            real(c_double), value :: flops, bytes
        end subroutine work_fn
    end interface

    type(c_funptr), save :: begin_at = c_null_funptr, end_at = c_null_funptr, work_at = c_null_funptr
    logical, save :: looked = .false.

contains

    subroutine look_up()
        ! threads that race here write the same two addresses
        begin_at = c_dlsym(c_null_ptr, "ceiling_region_begin" // c_null_char)
        end_at = c_dlsym(c_null_ptr, "ceiling_region_end" // c_null_char)
        work_at = c_dlsym(c_null_ptr, "ceiling_work" // c_null_char)
        looked = .true.
    end subroutine look_up

    subroutine call_region(at, name)
        type(c_funptr), intent(in) :: at
        character(len=*), intent(in) :: name
        procedure(region_fn), pointer :: fn
        if (.not. c_associated(at)) return
        call c_f_procpointer(at, fn)
        call fn(trim(name) // c_null_char)
    end subroutine call_region

    subroutine ceiling_region_begin(name)
        character(len=*), intent(in) :: name
        if (.not. looked) call look_up()
        call call_region(begin_at, name)
    end subroutine ceiling_region_begin

    subroutine ceiling_region_end(name)
        character(len=*), intent(in) :: name
        if (.not. looked) call look_up()
        call call_region(end_at, name)
    end subroutine ceiling_region_end

    subroutine work_r8(flops, bytes)
        real(c_double), intent(in) :: flops, bytes
        procedure(work_fn), pointer :: fn
        if (.not. looked) call look_up()
        if (.not. c_associated(work_at)) return
        call c_f_procpointer(work_at, fn)
        call fn(flops, bytes)
    end subroutine work_r8

    subroutine work_r4(flops, bytes)
        real, intent(in) :: flops, bytes
        call work_r8(real(flops, c_double), real(bytes, c_double))
    end subroutine work_r4

end module ceiling_region
