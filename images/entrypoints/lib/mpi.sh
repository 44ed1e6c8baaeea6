# shellcheck shell=bash
# The launcher's MPI command line for each MPI implementation (sourced by lib/launcher.sh and by the unit tests).
# Pure functions of their arguments: no file, network or process is touched here.
#
#   kt_mpi_program IMPLEMENTATION           the program that launches ranks: mpirun, or mpiexec for MPICH.
#   kt_mpi_flavor IMPLEMENTATION VERSION    openmpi4, openmpi5, intelmpi or mpich, from spec.mpi.implementation and
#                                           what `<program> --version` printed; a mismatch prints the fix, returns 1.
#   kt_mpi_command FLAVOR NP HOSTFILE SSH_OPTIONS IFACE AS_ROOT NAMES COMMAND...
#                                           sets KT_MPI_ARGV: NAMES (space-separated) are the variables the ranks get.
#                                           Each rank's output is tagged with its rank (`[1,0]<stdout>:` from Open MPI,
#                                           `[0] ` from Hydra), as horovodrun tags it: the log says who printed what,
#                                           and lib/failure_report.py keeps each rank's last lines.

kt_mpi_program() {
  if [ "$1" = MPICH ]; then echo mpiexec; else echo mpirun; fi
}

kt_mpi_flavor() {
  local implementation=$1 version=$2 found=""
  case $version in
    *"Intel(R) MPI"*) found=IntelMPI ;;
    *"Open MPI"* | *OpenRTE*) found=OpenMPI ;;
    *HYDRA* | *MPICH*) found=MPICH ;;
  esac
  if [ -n "$found" ] && [ "$found" != "$implementation" ]; then
    echo "$(kt_mpi_program "$implementation") is $found but spec.mpi.implementation is $implementation:" \
      "set spec.mpi.implementation: $found"
    return 1
  fi
  case $implementation in
    OpenMPI)
      if [[ $version =~ \((Open MPI|OpenRTE)\)\ ([0-9]+)\. ]] && [ "${BASH_REMATCH[2]}" -ge 5 ]; then
        echo openmpi5
      else
        echo openmpi4
      fi ;;
    IntelMPI) echo intelmpi ;;
    MPICH) echo mpich ;;
    *) echo "spec.mpi.implementation '$implementation' is not one of OpenMPI, IntelMPI, MPICH"; return 1 ;;
  esac
}

kt_mpi_command() {
  local flavor=$1 np=$2 hostfile=$3 ssh_options=$4 iface=$5 as_root=$6 names=$7 name list=()
  shift 7
  read -r -a list <<<"$names"
  case $flavor in
    openmpi4 | openmpi5)
      KT_MPI_ARGV=(mpirun)
      [ "$as_root" = 1 ] && KT_MPI_ARGV+=(--allow-run-as-root)
      KT_MPI_ARGV+=(-np "$np" --hostfile "$hostfile" --bind-to none --map-by slot --tag-output)
      # No tree spawn: a worker holds no private key, and PRRTE cuts forwarded ssh options at the first '='.
      # Open MPI 4 must keep the hostfile's full names (it would ssh to the bare pod name, which does not resolve);
      # PRRTE must shorten them, or it does not see that the launcher's own line (runAsWorker) is this host.
      if [ "$flavor" = openmpi4 ]; then
        KT_MPI_ARGV+=(--mca plm_rsh_agent ssh --mca plm_rsh_args "$ssh_options" --mca plm_rsh_no_tree_spawn 1
          --mca orte_keep_fqdn_hostnames 1)
      else
        KT_MPI_ARGV+=(--prtemca plm_ssh_agent ssh --prtemca plm_ssh_args "$ssh_options"
          --prtemca plm_ssh_no_tree_spawn 1)
      fi
      for name in "${list[@]+"${list[@]}"}"; do KT_MPI_ARGV+=(-x "$name"); done ;;
    mpich | intelmpi)
      # Hydra forwards the whole environment unless told a list: the list keeps the launcher's own (HOSTNAME, ...)
      # away from the ranks. Its proxies dial back to the launcher's address on IFACE (its hostname may not resolve).
      # Intel MPI's -f ignores a line's slot count (one rank per core); -machinefile honours it.
      if [ "$flavor" = mpich ]; then
        KT_MPI_ARGV=(env "HYDRA_LAUNCHER_EXTRA_ARGS=$ssh_options" mpiexec -launcher ssh -f "$hostfile")
      else
        KT_MPI_ARGV=(mpirun -bootstrap ssh -bootstrap-exec-args "$ssh_options" -machinefile "$hostfile")
      fi
      KT_MPI_ARGV+=(-n "$np" -l)
      [ -n "$iface" ] && KT_MPI_ARGV+=(-iface "$iface")
      local IFS=,
      [ ${#list[@]} -gt 0 ] && KT_MPI_ARGV+=(-genvlist "${list[*]}") ;;
    *) return 1 ;;
  esac
  KT_MPI_ARGV+=("$@")
}
