# ljmp_install_configured(): installs a file configured with the prefix of the install itself, not of the configure step.
#
# ljmp_install_configured(TEMPLATE NAME DESTINATION COMPONENT [PROGRAM])
# configures TEMPLATE now with the caller's @VARIABLES@, then again at
# install time with @LJMP_PREFIX@ set to the install's prefix
# (`cmake --install --prefix`, or /usr when cpack makes the packages), and
# installs the result as DESTINATION/NAME (DESTINATION relative to the
# prefix; PROGRAM: executable).  A value that must follow the prefix is
# written in terms of @LJMP_PREFIX@ in the caller's variables.
function(ljmp_install_configured template name destination component)
  set(type FILE)
  if(ARGN STREQUAL "PROGRAM")
    set(type PROGRAM)
  endif()
  set(LJMP_PREFIX "@LJMP_PREFIX@")
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/install-time/${component})
  configure_file(${template} ${dir}/${name}.in @ONLY)
  install(CODE "
    set(LJMP_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${dir}/${name}.in\" \"${dir}/${name}\" @ONLY)
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${destination}\"
         TYPE ${type} FILES \"${dir}/${name}\")"
    COMPONENT ${component})
endfunction()
